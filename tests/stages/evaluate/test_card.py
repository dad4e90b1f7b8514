"""Model cards: a trained run's README.md is a Hub model card (huggingface_hub's ModelCard loads it, with a
`model-index` of the run's stored results), rewritten when results for the run are stored; its usage snippet,
run as it stands in a fresh process, gives amrsim's vectors and scores."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from amrsim.config import load_config
from amrsim.evaluate.sts import sts_scores
from amrsim.methods.loaders import load_encoder
from amrsim.metrics.engine import score_pairs
from amrsim.stages import metrics_stage
from amrsim.stages.evaluate import bitext_eval
from amrsim.stages.evaluate.card import (
    hub_id,
    iso_language,
    refresh_cards,
    table_versions,
    write_card,
)
from amrsim.stages.evaluate.common import store_results
from amrsim.stages.evaluate.results import score_rows
from amrsim.stages.ingest import ingest_stage
from amrsim.stages.train import train_method
from amrsim.warehouse import Warehouse
from tests.forked import fresh_python
from tests.helpers import sentence_transformer_run, tiny_sentence_transformer
from tests.stages.train.test_s3bert import CONFIG as S3BERT_CONFIG

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
ANIMALS, COLOURS, VERBS = ["cat", "dog", "bird", "fish"], ["red", "blue", "green", "black"], ["run", "eat", "sleep",
                                                                                              "sing"]
# appended to a card's python block: saves what the snippet computed and the inputs it computed it on
RUNNER = """
import json as _json, sys as _sys
import numpy as _np
_g = globals()
_out = _g["scores"] if "scores" in _g else _g["embeddings"]
_inputs = (_g["pairs"] if "pairs" in _g else [list(p) for p in zip(_g["sentences1"], _g["sentences2"])]
           if "sentences1" in _g else _g["sentences"])
_np.save(_sys.argv[1], _np.asarray(_out, dtype=_np.float64))
print(_json.dumps({"inputs": [list(x) if isinstance(x, tuple) else x for x in _inputs],
                   "amrsim": sorted(m for m in _sys.modules if m.split(".")[0] == "amrsim")}))
"""


def pair_rows(seed: int, n: int, split: str) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        words = [(COLOURS[a[1]], ANIMALS[a[0]], VERBS[a[2]]) for a in rng.integers(4, size=(2, 3))]
        text = ["the {} {} {}s".format(*w) for w in words]
        amr = ["(v / {2}-01 :ARG0 (a / {1} :mod (c / {0})))".format(*w) for w in words]
        rows.append({"idx": f"{split}{i}", "split": split, "gold": float(rng.random() * 5), "sentence1": text[0],
                     "sentence2": text[1], "amr1": amr[0], "amr2": amr[1]})
    return rows


def load_card(path: Path):
    from huggingface_hub import ModelCard

    return ModelCard.load(path)


def run_snippet(card_text: str, run: Path, models_root: Path, tmp: Path) -> tuple[np.ndarray, list, list[str]]:
    """Run the card's python block in a fresh process, its placeholder paths replaced by the run's: (what it
    computed, the inputs it computed it on, the amrsim modules that process imported)."""
    code = re.search(r"```python\n(.*?)```", card_text, re.S).group(1)
    placeholder = f'"path/to/{run.parent.name}/{run.name}"'
    assert placeholder in code or '"path/to/warehouse/models"' in code
    code = code.replace(placeholder, json.dumps(str(run))).replace('"path/to/warehouse/models"',
                                                                   json.dumps(str(models_root)))
    out = tmp / "snippet.npy"
    done = fresh_python(code + RUNNER, str(out), cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return np.load(out), report["inputs"], report["amrsim"]


def amrsim_values(name: str, models_root: Path, inputs: list) -> np.ndarray:
    model = load_encoder(name, models_root=models_root, device="cpu")
    if isinstance(inputs[0], list):
        return model.score([p[0] for p in inputs], [p[1] for p in inputs])
    return model.encode(inputs)


def store_sts(wh: Warehouse, name: str, dataset: str, lang_pair: str, pairs: list[list[str]]) -> list:
    """Score `pairs` with amrsim's model `name` against made-up gold scores and store them as `eval/results` rows
    (which rewrites the run's card); returns the Scores."""
    model = load_encoder(name, models_root=wh.models_root, device="cpu")
    first, second = [p[0] for p in pairs], [p[1] for p in pairs]
    pred = (model.score(first, second) if model.dim == 0 else
            np.sum(model.encode(first) * model.encode(second), axis=1))
    scores = sts_scores(name, dataset, "test", lang_pair, pred, np.arange(len(pairs), dtype=float))
    assert store_results(wh, score_rows(scores, "e1", "cfg", ["k"], wh.models_root)) == len(scores)
    return scores


def assert_model_index(card, scores: list) -> None:
    """Every defined score is in the card's model-index, x 100 as stored, with its dataset, split and language."""
    results = {(r.dataset_name, r.dataset_config, r.dataset_split, r.metric_name): r for r in card.data.eval_results}
    for s in scores:
        if s.value is None:
            continue
        hit = [r for (name, config, split, metric), r in results.items()
               if (name.endswith(f"({s.dataset})") or name.startswith(f"{s.dataset} ("))
               and (config, split, metric) == (s.lang_pair, s.split, f"{s.metric} x 100")]
        assert len(hit) == 1, (s, list(results))
        assert hit[0].metric_value == pytest.approx(s.value, abs=1e-4)


# ------------------------------------------------------------------------------------------------ the whole path


@pytest.mark.slow
def test_a_trained_run_gets_a_card_that_new_results_update(tmp_path, write_config, one_thread):
    base = tiny_sentence_transformer(tmp_path / "base", hidden=64)  # 3 aspects x 16 dims + a residual
    rows = pair_rows(0, 16, "train") + pair_rows(1, 8, "dev")
    (tmp_path / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    cfg = load_config(write_config(S3BERT_CONFIG.format(model=json.dumps(str(base)),
                                                       aspects="[concepts, frames, named_entities]")))
    wh = Warehouse(cfg.warehouse_root)
    ingest_stage(cfg.section("toy"), "toy_pairs", "r0")
    options = cfg.project.pipelines["toy"].metrics.options()
    metrics_stage(wh, "toy", "toy_pairs", options, "r0", partial(score_pairs, options=options))
    summary = train_method(cfg.section("toy"), "s3bert", cfg.project.pipelines["toy"].train[0].params, "run1")
    assert summary["status"] == "ok"

    path = wh.models_root / "s3bert" / "run1" / "README.md"
    card = load_card(path)
    assert card.data.library_name == "sentence-transformers" and card.data.pipeline_tag == "sentence-similarity"
    assert {"s3bert", "amrsim", "sentence-transformers"} <= set(card.data.tags)
    # toy_pairs is no public dataset: named in the text, not under `datasets`; a local base has no Hub id or license
    assert card.data.datasets is None and card.data.base_model is None and card.data.license is None
    assert card.data.eval_results is None and card.data.language == ["en"]  # no results; model.json's language
    assert f"`<local>/{base.name}`" in card.text and "Opitz & Frank 2022" in card.text
    assert "None stored yet" in card.text
    assert str(tmp_path) not in card.text  # a card for the Hub names no path of this machine (issue 53)
    for table in ("pairs", "amr", "amr_metrics"):
        assert f"| toy_pairs.{table} | {wh.version('toy_pairs', table)} |" in card.text
    assert "| n_aspects | 3 |" in card.text and "| lr | 0.001 |" in card.text

    tsv = tmp_path / "tatoeba.deu-eng.tsv"
    tsv.write_text("deu\teng\nder hund\tthe dog\ndie katze\tthe cat\n", encoding="utf-8")
    results = bitext_eval(wh, "s3bert:latest", tsv, "e1", device="cpu")
    card = load_card(path)
    assert "None stored yet" not in card.text and card.data.language == ["de", "en"]
    assert {r.dataset_type for r in card.data.eval_results} == {"mteb/tatoeba-bitext-mining"}
    assert {r.task_name for r in card.data.eval_results} == {"Bitext Mining"}
    for row in results.iter_rows(named=True):
        assert f"| bitext | tatoeba | test | deu-eng | {row['metric']} | {row['value']:.2f} | 2 |" in card.text
    assert_model_index(card, [s for s in (_score(r) for r in results.iter_rows(named=True))])
    values, inputs, imported = run_snippet(card.text, path.parent, wh.models_root, tmp_path)
    assert imported == []  # sentence-transformers' own classes: amrsim is not even imported
    np.testing.assert_allclose(values, amrsim_values("s3bert:run1", wh.models_root, inputs), atol=1e-6, rtol=0)


def _score(row: dict):
    from amrsim.evaluate import Score

    return Score(row["task"], row["model"], row["dataset"], row["split"], row["lang_pair"], row["metric"],
                 row["value"], row["n"])


# ------------------------------------------------------------------------------------- each method's snippet


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tiny_sentence_transformer(tmp_path_factory.mktemp("base"), hidden=64)


@pytest.fixture(scope="module")
def pear_network(base):
    from amrsim.methods.pear import PearCrossEncoder

    return PearCrossEncoder(str(base), device="cpu")  # a random head: enough to compare two ways of scoring


PAIRS = [["the red cat runs", "the blue dog sleeps"], ["der hund", "the cat runs"], ["a bird sings", "the fish"],
         ["the green bird", "the red cat"]]


def build_dueam(wh: Warehouse, base: Path) -> str:
    sentence_transformer_run(wh.models_root, "dueam", "d1", datetime(2026, 1, 1, tzinfo=UTC), base,
                             learner_name="minilm", data={"langs_found": ["de", "en"],
                                                          "table_versions": {"stsb_en_train.pairs": 4,
                                                                             "nli.triples": 2}})
    return "dueam:d1"


def build_pear(wh: Warehouse, network, symmetric: bool) -> str:
    from amrsim.methods.pear import save_run

    save_run(network, wh.models_root / "pear" / "p1", {"symmetric": symmetric, "base_model": "minilm",
                                                       "data": {"langs": ["en"]}})
    return "pear:p1"


def build_old_symmetric_pear(wh: Warehouse, network) -> str:
    """A symmetric run as saved before the saved model averaged both orders: sentence-transformers' own modules,
    which score one order; amrsim averages (model.json `symmetric`)."""
    name = build_pear(wh, network, symmetric=False)
    meta_path = wh.models_root / "pear" / "p1" / "model.json"
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text(encoding="utf-8")), "symmetric": True}),
                         encoding="utf-8")
    return name


def build_pear_fused(wh: Warehouse, network) -> str:
    from amrsim.methods.pear import fit_fusion, save_fused
    from amrsim.methods.pear.model import base_cosines

    build_pear(wh, network, symmetric=False)
    first, second = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    cosines = base_cosines(load_encoder("minilm", device="cpu"), first, second)
    fusion = fit_fusion(network.predict(first, second), cosines, "minilm", 0.3)
    save_fused(wh.models_root / "pear_fused" / "p1", "pear:p1", fusion,
               {"data": {"langs": ["en"], "table_versions": {"sick_train.pairs": 1}},
                "metrics": {"fit_pairs": 4, "fit_spearman": 40.0}})
    return "pear_fused:p1"


@pytest.mark.slow
@pytest.mark.parametrize(("method", "library", "license_", "bases", "datasets", "languages", "trust"), [
    ("dueam", "SentenceTransformer", "apache-2.0", MINILM, ["mteb/stsbenchmark-sts"], ["de", "en"], False),
    ("pear", "CrossEncoder", "apache-2.0", MINILM, None, ["en"], False),
    ("pear_symmetric", "CrossEncoder", "apache-2.0", MINILM, None, ["en"], True),
    ("pear_symmetric_old", "CrossEncoder", "apache-2.0", MINILM, None, ["en"], False),
    ("pear_fused", "CrossEncoder", "apache-2.0", MINILM, ["mteb/sickr-sts"], ["en"], True),
])
def test_each_methods_card_is_a_hub_card_whose_snippet_gives_amrsims_numbers(
        method, library, license_, bases, datasets, languages, trust, wh, base, pear_network, tmp_path, one_thread):
    name = {"dueam": lambda: build_dueam(wh, base), "pear": lambda: build_pear(wh, pear_network, False),
            "pear_symmetric": lambda: build_pear(wh, pear_network, True),
            "pear_symmetric_old": lambda: build_old_symmetric_pear(wh, pear_network),
            "pear_fused": lambda: build_pear_fused(wh, pear_network)}[method]()
    path = write_card(wh, name)
    card = load_card(path)  # a run without results: a valid card with no model-index
    assert card.data.eval_results is None and "model-index" not in card.content.split("\n---")[0]
    assert card.data.library_name == "sentence-transformers"
    assert (card.data.license, card.data.base_model, card.data.datasets) == (license_, bases, datasets)
    assert f'{library}("path/to/' in card.text and ("trust_remote_code=True" in card.text) == trust
    assert ("mean of both sentence orders" in card.text) == (method == "pear_symmetric_old")

    scores = store_sts(wh, name, "stsb_en_test", "en-en", PAIRS)
    scores += store_sts(wh, name, "my_pairs", "en-de", PAIRS)  # a local dataset: its local name, no Hub id
    card = load_card(path)
    assert card.data.language == sorted({*languages, "de"})
    assert_model_index(card, scores)
    types = {r.dataset_name: r.dataset_type for r in card.data.eval_results}
    assert types == {"STSBenchmark (stsb_en_test)": "mteb/stsbenchmark-sts",
                     "my_pairs (local amrsim dataset)": "my_pairs"}
    assert {r.task_type for r in card.data.eval_results} == {"sentence-similarity"}
    assert "my_pairs" not in (card.data.datasets or [])

    values, inputs, imported = run_snippet(card.text, path.parent, wh.models_root, tmp_path)
    assert not imported  # trust_remote_code runs the module code in the folder, never amrsim's (issue 53)
    np.testing.assert_allclose(values, amrsim_values(name, wh.models_root, inputs), atol=1e-6, rtol=0)
    if method.startswith("pear_symmetric"):  # the orders differ: one order's scores would fail the check above
        one_order = pear_network.predict([p[0] for p in inputs], [p[1] for p in inputs])
        assert np.abs(values - one_order).max() > 1e-6


@pytest.mark.slow
def test_a_meaning_run_card_loads_with_trust_remote_code(wh, base, tmp_path, one_thread):
    import torch

    from amrsim.methods.meaning.model import MeaningModel, StsHead, save_model
    from amrsim.methods.meaning.params import Hyper

    torch.manual_seed(0)
    save_model(wh.models_root / "meaning" / "m1", MeaningModel(64, 2, head="mlp", hidden=8), f"hf:{base}",
               ["en", "de"], Hyper(head="mlp", hidden=8, sts_hidden=8), StsHead(64, hidden=8))
    path = write_card(wh, "meaning:m1")
    card = load_card(path)
    assert card.data.library_name == "sentence-transformers" and "trust_remote_code=True" in card.text
    assert "`modeling_amrsim_meaning.MeaningEncoder`" in card.text and "amrsim_code.json" in card.text
    assert card.data.base_model is None and card.data.license is None  # a local base: neither is known
    scores = store_sts(wh, "meaning:m1", "stsb_multi_test", "de-de", PAIRS)
    scores += store_sts(wh, "meaning:m1", "stsb_multi_test", "en-de", PAIRS)  # cross-lingual: no MTEB subset
    card = load_card(path)
    assert_model_index(card, scores)
    types = {r.dataset_config: r.dataset_type for r in card.data.eval_results}
    assert types == {"de-de": "mteb/stsb_multi_mt", "en-de": "stsb_multi_test"}  # never claimed as MTEB's data
    values, inputs, imported = run_snippet(card.text, path.parent, wh.models_root, tmp_path)
    assert not imported  # the module code lies in the run folder (issue 53)
    np.testing.assert_allclose(values, amrsim_values("meaning:m1", wh.models_root, inputs), atol=1e-6, rtol=0)


@pytest.mark.slow
def test_an_mse_amr_run_card_loads_with_trust_remote_code(wh, base, tmp_path, one_thread):
    from amrsim.methods.mse_amr import Params
    from amrsim.methods.mse_amr.train import train_mse_amr
    from tests.helpers import tiny_bert
    from tests.methods.test_mse_amr import VOCAB, _triples

    graph_bert = tiny_bert(tmp_path / "graph_bert", VOCAB[5:])
    train_mse_amr(_triples(), wh.models_root / "mse_amr" / "a1",
                  Params(datasets=["toy_nli"], encoder=str(graph_bert), device="cpu", min_count=2, max_length=64,
                         batch_size=8, micro_batch=4, epochs=1, base_encoder=f"hf:{base}"))
    path = write_card(wh, "mse_amr:a1")
    card = load_card(path)
    assert card.data.library_name == "sentence-transformers" and "trust_remote_code=True" in card.text
    assert "Requires `pip install amrsim`" in card.text and "parser `ud`" in card.text  # a declared requirement
    texts = [["the boy wants the apple", "the girl sees the dog"], ["a cat eats", "the dog chases the ball"]]
    scores = store_sts(wh, "mse_amr:a1", "sick_test", "en-en", texts)
    card = load_card(path)
    assert_model_index(card, scores)
    assert {r.dataset_type for r in card.data.eval_results} == {"mteb/sickr-sts"}
    values, inputs, imported = run_snippet(card.text, path.parent, wh.models_root, tmp_path)
    assert imported
    np.testing.assert_allclose(values, amrsim_values("mse_amr:a1", wh.models_root, inputs), atol=1e-6, rtol=0)


def test_pear_fused_card_names_the_real_command_and_the_fusion(wh, pear_network, one_thread):
    from amrsim.methods.pear import Fusion

    build_pear_fused(wh, pear_network)
    text = write_card(wh, "pear_fused:p1").read_text(encoding="utf-8")
    assert "amrsim train pear_fused" not in text and "`amrsim train pear`" in text and "fused_with" in text
    fusion = Fusion(**json.loads((wh.models_root / "pear_fused" / "p1" / "model.json").read_text())["fusion"])
    method = text.split("## Method and paper")[1].split("## Base model")[0]
    assert "score = 0.3 · z(PEAR) + 0.7 · z(cosine)" in method and "`pear:p1`" in method
    assert f"| PEAR | {fusion.pear_mean:.6g} | {fusion.pear_std:.6g} |" in method
    assert f"| cosine | {fusion.base_mean:.6g} | {fusion.base_std:.6g} |" in method


def test_an_old_run_without_modules_json_loads_through_amrsim_in_its_card(wh, base, tmp_path, one_thread):
    run = sentence_transformer_run(wh.models_root, "dueam", "old", datetime(2025, 1, 1, tzinfo=UTC), base)
    (run / "modules.json").unlink()  # as runs saved before run directories loaded with sentence-transformers
    card = load_card(write_card(wh, "dueam:old"))
    assert card.data.library_name is None and "load_encoder(\"dueam:old\"" in card.text
    values, inputs, imported = run_snippet(card.text, run, wh.models_root, tmp_path)
    assert imported
    np.testing.assert_allclose(values, amrsim_values("dueam:old", wh.models_root, inputs), atol=1e-6, rtol=0)


# ------------------------------------------------------------------------------------------------------ parts


def test_a_run_root_json_that_does_not_parse_is_an_error_naming_the_file(wh, base):
    from amrsim.errors import InputError

    run = sentence_transformer_run(wh.models_root, "dueam", "d1", datetime(2026, 1, 1, tzinfo=UTC), base)
    (run / "modules.json").write_text("[{", encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(str(run / "modules.json"))):
        write_card(wh, "dueam:d1")


def test_refresh_skips_names_that_are_not_runs_and_runs_without_model_json(wh, tmp_path):
    enc = tiny_sentence_transformer(tmp_path / "enc")
    sentence_transformer_run(wh.models_root, "dueam", "d1", datetime(2026, 1, 1, tzinfo=UTC), enc,
                             learner_name="minilm", data={"table_versions": {"nli.triples": 4}},
                             params={"lam": 0.003})
    (wh.models_root / "dueam" / "broken").mkdir()
    written = refresh_cards(wh, ["minilm", "hf:x/y", "dueam:latest", "dueam:d1", "dueam:broken", "x:../../etc"])
    assert written == [wh.models_root / "dueam" / "d1" / "README.md"]
    card = load_card(written[0])
    assert card.data.base_model == MINILM and card.data.license == "apache-2.0"
    assert card.data.datasets is None and "| nli.triples | 4 |" in card.text  # a warehouse-only dataset


@pytest.mark.parametrize(("name", "expected"), [("minilm", MINILM), ("muse", None), ("hf:org/model#cls", "org/model"),
                                                ("hf:./local", None), (None, None)])
def test_hub_ids(name, expected):
    assert hub_id(name) == expected


@pytest.mark.parametrize(("code", "expected"), [("deu", "de"), ("en", "en"), ("en-US", "en"), ("cmn", "zh"),
                                                ("ang", "ang"), ("all", None), ("concepts", None), (None, None)])
def test_card_languages_are_iso_639_1_where_there_is_one(code, expected):
    assert iso_language(code) == expected


def test_table_versions_are_found_wherever_a_method_records_them():
    meta = {"data": {"table_versions": {"a.pairs": 1}}, "stage1": {"versions": {"tables": {"b.parallel": 2},
                                                                                "files": {"f": "x"}}},
            "sts_table_versions": {"c.pairs": 3}}
    assert table_versions(meta) == {"a.pairs": 1, "b.parallel": 2, "c.pairs": 3}


def test_public_datasets_of_a_run_are_its_mteb_tasks_data_and_known_training_sets():
    from amrsim.stages.evaluate.card import public_dataset

    assert public_dataset("stsb_en_dev") == "mteb/stsbenchmark-sts"
    assert public_dataset("sick_nli_train") == "mteb/sickr-sts"
    assert public_dataset("xnli_test_nli") == "facebook/xnli"  # MSE-AMR's XNLI triples: no MTEB task, still public
    assert public_dataset("my_pairs") is None


def test_the_cards_results_stand_beside_the_same_results_of_the_runs_base(wh, base, one_thread):
    name = build_dueam(wh, base)  # learner minilm: the encoder the run is compared with
    ours = {s.metric: s.value for s in store_sts(wh, name, "stsb_en_test", "en-en", PAIRS)}
    store_sts(wh, name, "my_pairs", "en-de", PAIRS)  # minilm has no result there: its cells stay empty
    card = wh.models_root / "dueam" / "d1" / "README.md"
    assert "difference" not in load_card(card).text
    # storing the base's results rewrites the cards of the runs compared with it
    theirs = {s.metric: s.value for s in store_sts(wh, "minilm", "stsb_en_test", "en-en", PAIRS)}
    text = load_card(card).text
    assert "| task | dataset | split | lang pair | metric | value | minilm | difference | n |" in text
    for metric in ("spearman", "pearson"):
        assert (f"| sts | stsb_en_test | test | en-en | {metric} | {ours[metric]:.2f} | {theirs[metric]:.2f} | "
                f"{ours[metric] - theirs[metric]:+.2f} | 4 |") in text
    assert re.search(r"\| sts \| my_pairs \| test \| en-de \| spearman \| -?\d+\.\d\d \|  \|  \| 4 \|", text)


def test_a_card_without_base_results_keeps_the_plain_results_table(wh, base, one_thread):
    name = build_dueam(wh, base)
    store_sts(wh, name, "my_pairs", "en-de", PAIRS)
    text = load_card(write_card(wh, name)).text
    assert "| task | dataset | split | lang pair | metric | value | n |" in text and "difference" not in text
