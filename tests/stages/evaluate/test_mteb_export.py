"""`amrsim results export --format mteb` checked with mteb itself: `ResultCache.load_results` finds the export,
the task declarations are the installed mteb's, and every exported main score is the one mteb computes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from amrsim.errors import AmrsimError
from amrsim.evaluate import Score
from amrsim.evaluate.mteb_tasks import MTEB_TASKS, SNAPSHOT, declarations_from_mteb
from amrsim.stages.evaluate import export_mteb, model_facts, parse_task_overrides
from amrsim.stages.evaluate.results import score_rows

mteb = pytest.importorskip("mteb")  # a dev dependency: installed by `make test`


def sts(model: str, dataset: str, lang_pair: str, spearman: float, n: int, split: str = "test") -> list[Score]:
    return [Score("sts", model, dataset, split, lang_pair, "spearman", spearman, n),
            Score("sts", model, dataset, split, lang_pair, "pearson", spearman + 1, n)]


def sample_results() -> pl.DataFrame:
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


def complete_multilingual(model: str, seed: int) -> list[Score]:
    """Every split and subset of STSBenchmarkMultilingualSTS, with MTEB's item counts."""
    task, rng = MTEB_TASKS["STSBenchmarkMultilingualSTS"], np.random.default_rng(seed)
    return [s for split, sizes in task.sizes.items() for lang, n in sizes.items()
            for s in sts(model, f"stsb_multi_{split}", f"{lang}-{lang}", float(rng.uniform(40, 90)), n, split)]


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_task_declarations_are_the_installed_mteb_s():
    """A new mteb release that changes a task (revision, splits, subsets, sizes) fails here: regenerate the
    snapshot with `python -m amrsim.evaluate.mteb_tasks` and review the diff."""
    assert declarations_from_mteb() == json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def test_complete_tasks_are_written_and_incomplete_ones_named(tmp_path):
    written, left_out = export_mteb(sample_results(), tmp_path, cross_encoders={"pear:p1"})
    assert {(w.model, w.task) for w in written} == {("minilm", "STSBenchmark"), ("minilm", "SICK-R"),
                                                    ("pear:p1", "STSBenchmark")}
    assert all(w.complete for w in written)
    assert left_out[:2] == [
        "minilm stsb_multi_test test es-es -> STSBenchmarkMultilingualSTS es: 100 items, MTEB's data has 1379; "
        "not comparable",
        "muse tatoeba test ita-eng -> Tatoeba ita-eng: no F1 stored (evaluate again)"]
    assert left_out[2].startswith("minilm STSBenchmarkMultilingualSTS: incomplete, MTEB's main score also averages "
                                  "over dev: de, en, es, it and 5 more; test: en, es, fr, it and 5 more; not written")
    assert left_out[3].startswith("muse Tatoeba: incomplete") and "and 106 more" in left_out[3]
    assert not (tmp_path / "results/amrsim__muse").exists()
    files = {w.path.relative_to(tmp_path).as_posix() for w in written}
    assert files == {"results/sentence-transformers__all-MiniLM-L6-v2/no_revision_available/STSBenchmark.json",
                     "results/sentence-transformers__all-MiniLM-L6-v2/no_revision_available/SICK-R.json",
                     "results/amrsim__pear/p1/STSBenchmark.json"}


def test_entries_carry_the_keys_mteb_reads(tmp_path):
    written, _ = export_mteb(sample_results(), tmp_path, cross_encoders={"pear:p1"}, include_incomplete=True)
    assert len(written) == 5 and sum(not w.complete for w in written) == 2
    folder = tmp_path / "results/sentence-transformers__all-MiniLM-L6-v2/no_revision_available"
    stsb = load(folder / "STSBenchmark.json")
    assert stsb["task_name"] == "STSBenchmark" and stsb["dataset_revision"] == mteb.get_task(
        "STSBenchmark").metadata.dataset["revision"]
    [entry] = stsb["scores"]["test"]
    assert entry["main_score"] == entry["cosine_spearman"] == pytest.approx(0.82)
    assert entry["cosine_pearson"] == pytest.approx(0.83)
    assert entry["hf_subset"] == "default" and entry["languages"] == ["eng-Latn"]
    multi = load(folder / "STSBenchmarkMultilingualSTS.json")
    # en-de is not a subset of MTEB's stsb_multi_mt task: left out; dev and test are both MTEB splits
    assert [(s, e["hf_subset"], e["main_score"]) for s, es in sorted(multi["scores"].items()) for e in es] == [
        ("dev", "fr", pytest.approx(0.649)), ("test", "de", pytest.approx(0.624))]
    # a cross-encoder's score is its similarity: under the keys MTEB's main score reads
    pear = load(tmp_path / "results/amrsim__pear/p1/STSBenchmark.json")["scores"]["test"][0]
    assert pear["main_score"] == pear["cosine_spearman"] == pear["spearman"] == pytest.approx(0.85)
    tatoeba = {e["hf_subset"]: e for e in load(tmp_path / "results/amrsim__muse/no_revision_available/Tatoeba.json")[
        "scores"]["test"]}
    assert set(tatoeba) == {"deu-eng", "fra-eng"}
    assert tatoeba["deu-eng"]["main_score"] == tatoeba["deu-eng"]["f1"] == pytest.approx(0.969)
    assert tatoeba["deu-eng"]["accuracy"] == pytest.approx(0.975)
    # eng-fra rows: MTEB's fra-eng retrieves English for French, amrsim's tgt->src direction
    assert tatoeba["fra-eng"]["f1"] == pytest.approx(0.925) and tatoeba["fra-eng"]["accuracy"] == pytest.approx(0.93)
    assert tatoeba["fra-eng"]["languages"] == ["fra-Latn", "eng-Latn"]


def test_mteb_result_cache_loads_the_export_and_computes_the_same_main_scores(tmp_path):
    results = score_rows([*complete_multilingual("s3bert:r1", 0), *complete_multilingual("pear:p1", 1),
                          *sts("s3bert:r1", "stsb_en_test", "en-en", 80.5, 1379)], "e1", "c")
    written, left_out = export_mteb(results, tmp_path, cross_encoders={"pear:p1"})
    assert left_out == [] and len(written) == 3
    loaded = mteb.ResultCache(tmp_path).load_results(include_remote=False, validate_and_filter=True)
    found = {(m.model_name, m.model_revision, t.task_name): t for m in loaded.model_results for t in m.task_results}
    assert set(found) == {("amrsim/s3bert", "r1", "STSBenchmarkMultilingualSTS"),
                          ("amrsim/s3bert", "r1", "STSBenchmark"),
                          ("amrsim/pear", "p1", "STSBenchmarkMultilingualSTS")}
    for w in written:
        doc = load(w.path)
        ours = [e["main_score"] for entries in doc["scores"].values() for e in entries]
        assert len(ours) == (20 if w.task == "STSBenchmarkMultilingualSTS" else 1)
        name, revision = ("amrsim/" + w.model.split(":")[0], w.model.split(":")[1])
        assert found[(name, revision, w.task)].get_score() == pytest.approx(float(np.mean(ours)), abs=1e-12)
    # model_meta.json is mteb's ModelMeta: the cross-encoder says what it is
    from mteb.models.model_meta import ModelMeta

    def model_meta(folder: str) -> ModelMeta:  # as ResultCache reads it
        return ModelMeta.model_validate_json_resolved((tmp_path / "results" / folder / "model_meta.json").read_text())

    meta = model_meta("amrsim__pear/p1")
    assert meta.name == "amrsim/pear" and meta.revision == "p1" and meta.is_cross_encoder
    assert model_meta("amrsim__s3bert/r1").similarity_fn_name == "cosine"


@pytest.mark.filterwarnings("ignore:STSBenchmarkMultilingualSTS. Missing:UserWarning")  # what the test shows
def test_an_incomplete_task_written_anyway_has_no_leaderboard_score(tmp_path):
    """Why incomplete tasks are not written by default: mteb, validating against the task, has no main score for
    them (NaN), while the file alone would average what is there."""
    written, _ = export_mteb(sample_results(), tmp_path, models=["minilm"], include_incomplete=True)
    multi = next(w for w in written if w.task == "STSBenchmarkMultilingualSTS")
    assert multi.missing["test"][:2] == ["en", "es"]
    loaded = mteb.ResultCache(tmp_path).load_results(tasks=["STSBenchmarkMultilingualSTS"], include_remote=False,
                                                     validate_and_filter=True)
    [task_result] = [t for m in loaded.model_results for t in m.task_results]
    assert math.isnan(task_result.get_score())


def test_task_overrides_and_conflicts(tmp_path):
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


def test_model_facts_describe_trained_runs_and_packaged_encoders(tmp_path):
    from datetime import UTC, datetime

    from tests.helpers import sentence_transformer_run, tiny_sentence_transformer

    models = tmp_path / "models"
    sentence_transformer_run(models, "meaning", "r1", datetime(2026, 3, 4, tzinfo=UTC),
                             tiny_sentence_transformer(tmp_path / "enc"), base_encoder="minilm",
                             table_versions={"stsb_multi.pairs": 3, "bamboo.pairs": 1})
    facts = model_facts("meaning:r1", models)
    assert facts == {"release_date": "2026-03-04", "adapted_from": "sentence-transformers/all-MiniLM-L6-v2",
                     "license": "apache-2.0", "languages": ["eng-Latn"],
                     "training_datasets": ["STSBenchmarkMultilingualSTS"]}
    assert model_facts("minilm")["languages"] == ["eng-Latn"]
    assert "zho-Hans" in model_facts("muse")["languages"] and model_facts("muse")["license"] == "apache-2.0"
    assert model_facts("meaning:gone", models) == {}  # no such run: nothing known, nothing invented
    results = score_rows(complete_multilingual("meaning:r1", 2), "e1", "c")
    export_mteb(results, tmp_path / "out", facts=lambda m: model_facts(m, models))
    from mteb.models.model_meta import ModelMeta

    meta = ModelMeta.model_validate_json_resolved(
        (tmp_path / "out/results/amrsim__meaning/r1/model_meta.json").read_text(encoding="utf-8"))
    assert meta.adapted_from == "sentence-transformers/all-MiniLM-L6-v2" and meta.license == "apache-2.0"
    assert meta.training_datasets == {"STSBenchmarkMultilingualSTS"} and str(meta.release_date) == "2026-03-04"
