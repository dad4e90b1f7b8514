"""eval/results names the run behind `<method>:latest`, older tables migrate to that, and `amrsim results export
--format mteb` writes files MTEB's result schema accepts."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from deltalake import write_deltalake

from amrsim.evaluate import Score
from amrsim.stages.evaluate import bitext_eval, export_mteb, migrate_results, parse_task_overrides
from amrsim.stages.evaluate.results import EVAL, RESULTS, score_rows
from amrsim.warehouse.schemas import SCHEMAS
from tests.helpers import TEST_DATA, sentence_transformer_run, tiny_sentence_transformer

SCHEMA_FILE = TEST_DATA / "mteb_task_result.schema.json"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def encoders(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("enc")
    return [tiny_sentence_transformer(root / f"m{seed}", seed=seed) for seed in (0, 1)]


def bitext_file(tmp_path: Path) -> Path:
    path = tmp_path / "tatoeba.deu-eng.tsv"
    rows = [("der hund", "the dog"), ("die katze", "the cat"), ("der hund runs", "the dog runs")]
    path.write_text("deu\teng\n" + "".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8")
    return path


def test_latest_is_stored_under_the_run_it_resolves_to(wh, tmp_path, encoders):
    sentence_transformer_run(wh.models_root, "s3bert", "r1", T0, encoders[0])
    sentence_transformer_run(wh.models_root, "s3bert", "r2", T0 + timedelta(days=1), encoders[1])
    path = bitext_file(tmp_path)
    rows = bitext_eval(wh, "s3bert:latest", path, "e1", device="cpu")
    assert set(rows["model"]) == {"s3bert:r2"} and set(rows["model_requested"]) == {"s3bert:latest"}
    stored = wh.read(EVAL, RESULTS)
    assert stored.height == 5 and set(stored["model"]) == {"s3bert:r2"}
    # the run's own name finds the same rows: nothing recomputed, nothing appended
    again = bitext_eval(wh, "s3bert:r2", path, "e2", device="cpu")
    assert wh.read(EVAL, RESULTS).height == 5
    assert again.sort("metric")["value"].to_list() == rows.sort("metric")["value"].to_list()
    # the older run is another model: its own rows
    older = bitext_eval(wh, "s3bert:r1", path, "e3", device="cpu")
    assert set(older["model"]) == {"s3bert:r1"} and wh.read(EVAL, RESULTS).height == 10


def old_results_table(wh, rows: list[tuple[str, datetime]]) -> None:
    """An eval/results table as amrsim wrote it before `model_requested` existed."""
    old = SCHEMAS[RESULTS]
    old = old.remove(old.get_field_index("model_requested"))
    table = {f.name: [] for f in old}
    for i, (model, created) in enumerate(rows):
        for name, value in (("key", f"k{i}"), ("run_id", "e"), ("created_at", created), ("task", "sts"),
                            ("model", model), ("dataset", "d"), ("split", "test"), ("lang_pair", "en-en"),
                            ("metric", "spearman"), ("value", float(i)), ("n", 3), ("config_hash", "c")):
            table[name].append(value)
    import pyarrow as pa

    write_deltalake(str(wh.table_path(EVAL, RESULTS)), pa.table(table, schema=old))


def test_migration_names_the_run_that_was_latest_when_the_row_was_stored(wh, encoders):
    sentence_transformer_run(wh.models_root, "s3bert", "r1", T0, encoders[0])
    sentence_transformer_run(wh.models_root, "s3bert", "r2", T0 + timedelta(days=2), encoders[1])
    old_results_table(wh, [("s3bert:latest", T0 + timedelta(days=1)), ("s3bert:latest", T0 + timedelta(days=3)),
                           ("minilm", T0), ("dueam:latest", T0), ("s3bert:r1", T0 + timedelta(days=3))])
    version = wh.version(EVAL, RESULTS)
    assert migrate_results(wh) == (2, 1)
    assert wh.version(EVAL, RESULTS) == version + 1
    got = wh.read(EVAL, RESULTS).sort("key")
    assert got["model"].to_list() == ["s3bert:r1", "s3bert:r2", "minilm", "dueam:latest", "s3bert:r1"]
    assert got["model_requested"].to_list() == ["s3bert:latest", "s3bert:latest", "minilm", "dueam:latest",
                                                "s3bert:r1"]
    assert got["key"].to_list() == [f"k{i}" for i in range(5)] and got["value"].to_list() == [0.0, 1, 2, 3, 4]
    # nothing left to do: no commit (the unresolvable row stays as it was)
    assert migrate_results(wh) == (0, 0) and wh.version(EVAL, RESULTS) == version + 1


def test_migrating_a_missing_table_does_nothing(wh):
    assert migrate_results(wh) == (0, 0) and not wh.exists(EVAL, RESULTS)


def sample_results() -> pl.DataFrame:
    def sts(model: str, dataset: str, lang_pair: str, spearman: float, n: int, split: str = "test") -> list[Score]:
        return [Score("sts", model, dataset, split, lang_pair, "spearman", spearman, n),
                Score("sts", model, dataset, split, lang_pair, "pearson", spearman + 1, n)]

    # n as in MTEB's data (STSBenchmark test 1379 pairs, SICK-R 9927, stsb_multi_mt dev 1500), except es-es
    scores = [*sts("minilm", "stsb_en_test", "en-en", 82.0, 1379), *sts("minilm", "sick_all", "en-en", 77.0, 9927),
              *sts("minilm", "stsb_multi_test", "de-de", 62.4, 1379),
              *sts("minilm", "stsb_multi_test", "en-de", 50.0, 1379),
              *sts("minilm", "stsb_multi_test", "es-es", 61.6, 100),
              *sts("minilm", "stsb_multi_dev", "fr-fr", 64.9, 1500, split="dev"),
              *sts("minilm", "bamboo", "en-en", 1.0, 1379), *sts("pear:p1", "stsb_en_test", "en-en", 85.0, 1379)]
    scores += [Score("bitext", "muse", "tatoeba", "test", "deu-eng", m, v, 1000) for m, v in
               (("accuracy_src2tgt", 97.5), ("accuracy_tgt2src", 98.0), ("accuracy", 97.75), ("f1_src2tgt", 96.9),
                ("f1_tgt2src", 97.4))]
    scores += [Score("bitext", "muse", "tatoeba", "test", "eng-fra", m, v, 1000) for m, v in
               (("accuracy_src2tgt", 91.0), ("accuracy_tgt2src", 93.0), ("accuracy", 92.0), ("f1_src2tgt", 90.0),
                ("f1_tgt2src", 92.5))]
    scores += [Score("bitext", "muse", "tatoeba", "test", "ita-eng", "accuracy_src2tgt", 90.0, 1000)]  # no F1
    return score_rows(scores, "e1", "c")


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_mteb_export_writes_the_tasks_mteb_has_in_its_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    written, left_out = export_mteb(sample_results(), tmp_path, cross_encoders={"pear:p1"})
    assert left_out == [
        "minilm stsb_multi_test test es-es -> STSBenchmarkMultilingualSTS es: 100 items, MTEB's data has 1379; "
        "not comparable",
        "muse tatoeba test ita-eng -> Tatoeba ita-eng: no F1 stored (evaluate again)"]
    files = {p.relative_to(tmp_path).as_posix() for p in (w.path for w in written)}
    assert files == {"sentence-transformers__all-MiniLM-L6-v2/no_revision_available/STSBenchmark.json",
                     "sentence-transformers__all-MiniLM-L6-v2/no_revision_available/SICK-R.json",
                     "sentence-transformers__all-MiniLM-L6-v2/no_revision_available/STSBenchmarkMultilingualSTS.json",
                     "amrsim__pear/p1/STSBenchmark.json", "amrsim__muse/no_revision_available/Tatoeba.json"}
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    for item in written:
        jsonschema.validate(load(item.path), schema)
    stsb = load(tmp_path / "sentence-transformers__all-MiniLM-L6-v2/no_revision_available/STSBenchmark.json")
    assert stsb["task_name"] == "STSBenchmark"
    assert stsb["dataset_revision"] == "b0fddb56ed78048fa8b90373c8a3cfc37b684831"
    [entry] = stsb["scores"]["test"]
    assert entry["main_score"] == entry["cosine_spearman"] == pytest.approx(0.82)
    assert entry["cosine_pearson"] == pytest.approx(0.83)
    assert entry["hf_subset"] == "default" and entry["languages"] == ["eng-Latn"]
    multi = load(tmp_path / "sentence-transformers__all-MiniLM-L6-v2/no_revision_available/"
                            "STSBenchmarkMultilingualSTS.json")
    # en-de is not a subset of MTEB's stsb_multi_mt task: left out; dev and test are both MTEB splits
    assert [(s, e["hf_subset"], e["main_score"]) for s, es in sorted(multi["scores"].items()) for e in es] == [
        ("dev", "fr", pytest.approx(0.649)), ("test", "de", pytest.approx(0.624))]
    pear = load(tmp_path / "amrsim__pear/p1/STSBenchmark.json")["scores"]["test"][0]
    assert "cosine_spearman" not in pear and pear["main_score"] == pear["spearman"] == pytest.approx(0.85)
    tatoeba = {e["hf_subset"]: e for e in load(tmp_path / "amrsim__muse/no_revision_available/Tatoeba.json")[
        "scores"]["test"]}
    assert set(tatoeba) == {"deu-eng", "fra-eng"}
    assert tatoeba["deu-eng"]["main_score"] == tatoeba["deu-eng"]["f1"] == pytest.approx(0.969)
    assert tatoeba["deu-eng"]["accuracy"] == pytest.approx(0.975)
    # eng-fra rows: MTEB's fra-eng retrieves English for French, amrsim's tgt->src direction
    assert tatoeba["fra-eng"]["f1"] == pytest.approx(0.925) and tatoeba["fra-eng"]["accuracy"] == pytest.approx(0.93)
    assert tatoeba["fra-eng"]["languages"] == ["fra-Latn", "eng-Latn"]


def test_mteb_files_load_with_mteb_when_it_is_installed(tmp_path):
    task_result = pytest.importorskip("mteb.results.task_result", reason="mteb is not installed")
    for item in export_mteb(sample_results(), tmp_path, cross_encoders={"pear:p1"})[0]:
        result = task_result.TaskResult.from_disk(item.path, load_historic_data=False)
        assert result.task_name == item.task and result.get_score() > 0


def test_task_overrides_and_conflicts(tmp_path):
    from amrsim.errors import AmrsimError

    results = sample_results()
    written, _ = export_mteb(results, tmp_path, parse_task_overrides(["bamboo=STSBenchmark", "stsb_en_test=none"]))
    stsb = [w for w in written if w.task == "STSBenchmark" and w.model == "minilm"]
    assert [w.datasets for w in stsb] == [("bamboo",)]
    with pytest.raises(AmrsimError, match="'bamboo' and 'stsb_en_test' both give STSBenchmark test subset 'default'"):
        export_mteb(results, tmp_path, parse_task_overrides(["bamboo=STSBenchmark"]))
    with pytest.raises(AmrsimError, match="MTEB task 'STS99' unknown"):
        parse_task_overrides(["x=STS99"])
    with pytest.raises(AmrsimError, match="expected DATASET=TASK"):
        parse_task_overrides(["STSBenchmark"])


@pytest.mark.slow
def test_results_cli_migrates_and_exports(tmp_path, encoders):
    import subprocess
    import sys

    from amrsim.warehouse import Warehouse
    from tests.helpers import cli_env

    wh = Warehouse(tmp_path / "warehouse")  # no config file: ./warehouse
    old_results_table(wh, [("minilm", T0)])
    wh.append(EVAL, RESULTS, sample_results())  # an older table gains the new column on append, null there

    def amrsim(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "amrsim.cli", "results", *args], capture_output=True,
                              text=True, env=cli_env(tmp_path), cwd=tmp_path, timeout=300)

    done = amrsim("migrate")
    assert done.returncode == 0, done.stderr
    assert "0 rows renamed" in done.stdout and wh.read(EVAL, RESULTS)["model_requested"].null_count() == 0
    out = amrsim("export", "--format", "mteb", "--out", str(tmp_path / "mteb"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "mteb/amrsim__muse/no_revision_available/Tatoeba.json").is_file()
    bad = amrsim("export", "--out", str(tmp_path / "x"), "--task", "stsb_en_test=STS99")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --task 'stsb_en_test=STS99': MTEB task 'STS99' unknown; known: STSBenchmark, SICK-R, "
        "STSBenchmarkMultilingualSTS, STS17, STS22, Tatoeba, none"]
    assert not (tmp_path / "x").exists()
