"""eval/results names the run behind `<method>:latest`, older tables migrate to that, and `amrsim results` runs
both (the MTEB export itself: test_mteb_export.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from deltalake import write_deltalake

from amrsim.stages.evaluate import bitext_eval, migrate_results
from amrsim.stages.evaluate.results import EVAL, RESULTS
from amrsim.warehouse.schemas import SCHEMAS
from tests.helpers import sentence_transformer_run, tiny_sentence_transformer
from tests.stages.evaluate.test_mteb_export import sample_results

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
    stsb = tmp_path / "mteb/results/sentence-transformers__all-MiniLM-L6-v2/no_revision_available"
    assert (stsb / "STSBenchmark.json").is_file() and (stsb / "model_meta.json").is_file()
    # Tatoeba has 2 of MTEB's 112 subsets: named on stderr, not written
    assert "muse Tatoeba: incomplete" in out.stderr
    assert not (tmp_path / "mteb/results/amrsim__muse").exists()
    scripted = amrsim("export", "--out", str(tmp_path / "mteb2"), "--json")
    document = json.loads(scripted.stdout)
    assert scripted.returncode == 0 and {(w["model"], w["task"], w["complete"]) for w in document["written"]} == {
        ("minilm", "STSBenchmark", True), ("minilm", "SICK-R", True), ("pear:p1", "STSBenchmark", True)}
    assert any(r.startswith("muse Tatoeba: incomplete") for r in document["left_out"])
    bad = amrsim("export", "--out", str(tmp_path / "x"), "--task", "stsb_en_test=STS99")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --task 'stsb_en_test=STS99': MTEB task 'STS99' unknown; known: STSBenchmark, SICK-R, "
        "STSBenchmarkMultilingualSTS, STS17, STS22, Tatoeba, none"]
    assert not (tmp_path / "x").exists()
