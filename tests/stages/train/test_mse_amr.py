"""MSE-AMR in the pipeline: SICK-style triples derived at ingest, training data from the warehouse (a failed graph
skipped and counted, translations), a tiny end-to-end `train()` with resume and lineage, and `mse_amr:<run>` as a
graph-aware encoder (amr table lookup, parse now, pivot, a failing row with its reason)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from amrsim.config import DatasetConfig, load_config
from amrsim.errors import ConfigError, InputError
from amrsim.ingest import read_dataset
from amrsim.stages.ingest import ingest_stage
from amrsim.warehouse import Warehouse
from amrsim.warehouse.keys import content_key

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

SICK_HEADER = ["pair_id", "sentence_A", "sentence_B", "relatedness_score", "entailment_judgment"]
SICK_ROWS = [
    ["1", "A man is playing a guitar", "A person is playing an instrument", "4.5", "ENTAILMENT"],
    ["2", "A man is playing a guitar", "Nobody is playing a guitar", "3.0", "CONTRADICTION"],
    ["3", "A dog runs in the park", "An animal runs outside", "4.2", "ENTAILMENT"],
    ["4", "An animal runs outside", "No animal is running", "3.1", "contradiction"],  # labels match in any case
    ["5", "A woman slices an onion", "A woman cuts a vegetable", "4.6", "ENTAILMENT"],
    ["6", "A boy is swimming", "A girl is reading a book", "1.2", "NEUTRAL"],
    ["7", "A cat sleeps", "A cat is sleeping", "4.9", "MAYBE"],
    ["8", "", "A child is laughing", "2.0", "ENTAILMENT"],
]
FROM_PAIRS = {"sentence1": "sentence_A", "sentence2": "sentence_B", "label": "entailment_judgment",
              "entailment": ["ENTAILMENT"], "contradiction": ["CONTRADICTION"], "neutral": ["NEUTRAL"]}

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (conftest)


def sick_config(path: Path, **kw) -> DatasetConfig:
    return DatasetConfig(path=str(path), kind="triples", split="train", columns={"id": "pair_id"},
                         from_pairs={**FROM_PAIRS, **kw})


# --- SICK-derived triples ----------------------------------------------------------------------------------------


def test_triples_from_labelled_pairs(write_tsv):
    path = write_tsv("sick.tsv", SICK_HEADER, SICK_ROWS)
    tables = read_dataset(sick_config(path), path)
    triples = tables["triples"].sort("source_line")
    ok = triples.filter(pl.col("status") == "ok")
    by_id = {r["item_id"]: r for r in ok.iter_rows(named=True)}
    # 1: labelled contradiction of A (pair 2); 3: inferred, pair 4 contradicts B; 5: none -> random, never A or B
    assert set(by_id) == {"1/C2", "3/I4", next(i for i in by_id if i.startswith("5/R"))}
    assert by_id["1/C2"]["contradiction"] == "Nobody is playing a guitar"
    assert by_id["1/C2"]["source_line"] == 2 and by_id["1/C2"]["source_file"] == "sick.tsv"
    assert by_id["3/I4"]["contradiction"] == "No animal is running"
    random_row = next(r for i, r in by_id.items() if i.startswith("5/R"))
    assert random_row["contradiction"] not in ("A woman slices an onion", "A woman cuts a vegetable")
    assert set(ok["split"]) == {"train"} and set(ok["lang"]) == {"en"}
    failed = dict(zip(triples.filter(pl.col("status") == "failed")["source_line"],
                      triples.filter(pl.col("status") == "failed")["error"], strict=True))
    assert set(failed) == {8, 9}  # unknown label, empty sentence; neutral/contradiction rows make no triple
    assert "label 'MAYBE' is not one of" in failed[8] and failed[9] == "empty premise (sentence_A)"
    # deterministic, and the sentences of every ok triple are in the sentences table
    again = read_dataset(sick_config(path), path)["triples"]
    assert sorted(again["key"].to_list()) == sorted(triples["key"].to_list())
    keys = set(tables["sentences"]["key"])
    assert all(ok[f"{r}_key"].is_in(list(keys)).all() for r in ("premise", "entailment", "contradiction"))


def test_triples_from_pairs_options_and_validation(write_tsv):
    path = write_tsv("sick.tsv", SICK_HEADER, SICK_ROWS)
    strict = read_dataset(sick_config(path, infer=False, fallback="skip"), path)["triples"]
    ok = strict.filter(pl.col("status") == "ok")
    assert ok["item_id"].to_list() == ["1/C2"]
    skipped = strict.filter(pl.col("error").str.contains("fallback: skip"))
    assert sorted(skipped["item_id"].to_list()) == ["3", "5"]
    with pytest.raises(ValueError, match="from_pairs builds triples"):
        DatasetConfig(path="x.tsv", kind="pairs", from_pairs=FROM_PAIRS)
    with pytest.raises(ValueError, match="must not map"):
        DatasetConfig(path="x.tsv", kind="triples", columns={"premise": "a"}, from_pairs=FROM_PAIRS)
    with pytest.raises(ValueError, match="both"):
        DatasetConfig(path="x.tsv", kind="triples", from_pairs={**FROM_PAIRS, "neutral": ["entailment"]})


XNLI_HEADER = ["premise", "hypothesis", "label"]
XNLI_EN = [["He said he was home.", "He told them he was back.", "entailment"],
           ["She reads a book.", "She is asleep.", "contradiction"],  # contradicts row 4's premise, as sentence1
           ["He said he was home.", "He did not say a word.", "contradiction"],
           ["She is asleep.", "A woman is reading.", "entailment"],
           ["He said he was home.", "He came back from school.", "neutral"]]
XNLI_DE = [["Er sagte, er sei daheim.", "Er sagte ihnen, er sei zurück.", "entailment"],
           ["Sie liest ein Buch.", "Sie schläft.", "contradiction"],
           ["Er sagte, er sei daheim.", "Er sagte kein Wort.", "contradiction"],
           ["Sie schläft.", "Eine Frau liest.", "entailment"],
           ["Er sagte, er sei daheim.", "Er kam von der Schule.", "neutral"]]
XNLI_PAIRS = {"sentence1": "premise", "sentence2": "hypothesis", "label": "label", "fallback": "skip"}


def test_triples_from_pairs_with_row_aligned_translations(write_tsv):
    """XNLI: the triple is chosen on the English file and each translation's triple comes from the same rows and
    columns, the contradiction included when it was found as sentence1 of another row."""
    en, de = write_tsv("xnli_en.tsv", XNLI_HEADER, XNLI_EN), write_tsv("xnli_de.tsv", XNLI_HEADER, XNLI_DE)
    ds = DatasetConfig(path=str(en), kind="triples", split="train", from_pairs=XNLI_PAIRS,
                       translations={"de": {"path": str(de)}})
    tables = read_dataset(ds, en)
    ok = tables["triples"].filter(pl.col("status") == "ok")
    by = {(r["item_id"], r["lang"]): r for r in ok.iter_rows(named=True)}
    assert set(by) == {("L2/CL4", "en"), ("L2/CL4", "de"), ("L5/CL3", "en"), ("L5/CL3", "de")}
    assert [by[("L2/CL4", "de")][r] for r in ("premise", "entailment", "contradiction")] == [
        "Er sagte, er sei daheim.", "Er sagte ihnen, er sei zurück.", "Er sagte kein Wort."]
    # "She is asleep." contradicts "She reads a book." as the *hypothesis* of row 3: its German is that row's
    # sentence1, "Sie liest ein Buch."
    assert by[("L5/CL3", "en")]["contradiction"] == "She reads a book."
    assert by[("L5/CL3", "de")]["contradiction"] == "Sie liest ein Buch."
    parallel = tables["parallel"].filter(pl.col("status") == "ok")
    assert dict(zip(parallel["source"], parallel["target"], strict=True))["He did not say a word."] == \
        "Er sagte kein Wort."


def test_triples_from_pairs_translation_errors_name_the_file(write_tsv):
    en = write_tsv("xnli_en.tsv", XNLI_HEADER, XNLI_EN)
    short = write_tsv("xnli_fr.tsv", XNLI_HEADER, XNLI_DE[:4])
    ds = DatasetConfig(path=str(en), kind="triples", from_pairs=XNLI_PAIRS, translations={"fr": {"path": str(short)}})
    with pytest.raises(InputError, match="xnli_fr.tsv.*4 rows but .* has 5"):
        read_dataset(ds, en)
    empty_contradiction = [r[:] for r in XNLI_DE]
    empty_contradiction[2][1] = ""  # the German contradiction of the first triple
    de = write_tsv("xnli_de.tsv", XNLI_HEADER, empty_contradiction)
    ds = DatasetConfig(path=str(en), kind="triples", from_pairs=XNLI_PAIRS, translations={"de": {"path": str(de)}})
    triples = read_dataset(ds, en)["triples"]
    first = triples.filter(pl.col("item_id") == "L2/CL4")
    assert first.filter(pl.col("lang") == "en")["status"].to_list() == ["ok"]
    bad = first.filter(pl.col("lang") == "de")
    assert bad["status"].to_list() == ["failed"] and "contradiction" in bad["error"][0]
    with pytest.raises(ValueError, match="row-aligned pairs file"):
        DatasetConfig(path="x.tsv", kind="triples", from_pairs=XNLI_PAIRS, translations={"de": {"premise": "p_de"}})


# --- a tiny project ---------------------------------------------------------------------------------------------

NLI_HEADER = ["id", "split", "premise", "entailment", "contradiction", "premise_de", "entailment_de",
              "contradiction_de"]
NLI_ROWS = [
    ["t1", "train", "the boy wants the apple", "the boy likes the apple", "the boy does not want the apple",
     "der junge will den apfel", "der junge mag den apfel", "der junge will den apfel nicht"],
    ["t2", "train", "the girl sees the dog", "the girl sees an animal", "the girl sees no dog",
     "das mädchen sieht den hund", "das mädchen sieht ein tier", "das mädchen sieht keinen hund"],
    ["t3", "train", "the cat chases the ball", "the cat plays", "the cat sleeps",
     "die katze jagt den ball", "die katze spielt", "die katze schläft"],
    ["t4", "train", "the dog eats the apple", "the dog eats", "the dog eats nothing",
     "der hund isst den apfel", "der hund isst", "der hund isst nichts"],
    ["t5", "train", "the girl likes the cat", "the girl likes an animal", "the girl hates the cat",
     "das mädchen mag die katze", "das mädchen mag ein tier", "das mädchen hasst die katze"],
    ["t6", "dev", "the boy sees the ball", "the boy sees a toy", "the boy sees nothing",
     "der junge sieht den ball", "der junge sieht ein spielzeug", "der junge sieht nichts"],
]
DEV_ROWS = [["the boy wants the apple", "the boy likes the apple", "3.5"],
            ["the girl sees the dog", "the cat sleeps", "0.5"],
            ["the dog eats the apple", "the dog eats", "4.0"],
            ["the girl likes the cat", "the girl hates the cat", "1.5"]]
FAILED_SENTENCE = "the cat plays"  # its graph failed to parse: triple t3 is skipped


def graph_of(text: str) -> str:
    words = [w for w in re.findall(r"[a-zäöüß]+", text.lower()) if w not in ("the", "a", "an", "der", "die", "das",
                                                                              "den")]
    verb, rest = words[1] if len(words) > 1 else words[0], [words[0], *words[2:]]
    parts = " ".join(f":ARG{i} (x{i} / {w})" for i, w in enumerate(rest))
    return f"(v / {verb}-01 {parts})"


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "(", ")", ":", "-", "arg", "##0", "##1", "##2", "01",
         "polarity", *sorted({w for r in NLI_ROWS + DEV_ROWS for s in r for w in re.findall(r"[a-zäöüß]+", s)})]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = tmp_path_factory.mktemp("tiny_bert")
    tokenizer = BertTokenizerFast(vocab={t: i for i, t in enumerate(VOCAB)})
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path




def write_amr(wh: Warehouse, dataset: str, pivot_langs: dict[str, str | None] | None = None) -> None:
    """Graphs for every sentence of `dataset` as the parse stage would write them (parser ud); FAILED_SENTENCE
    fails; `pivot_langs` marks languages parsed through English."""
    sentences = wh.read(dataset, "sentences")
    rows = []
    for key, lang, text in zip(sentences["key"], sentences["lang"], sentences["text"], strict=True):
        pivot = (pivot_langs or {}).get(lang)
        failed = text == FAILED_SENTENCE
        rows.append({"key": content_key("amr", key, "ud", pivot or "", "paper"), "sentence_key": key, "lang": lang,
                     "penman": None if failed else graph_of(text), "parser": "ud", "pivot_lang": pivot,
                     "parsed_text": text, "linearized": None, "status": "failed" if failed else "ok",
                     "error": "ud: no root" if failed else None, "seconds": 0.0})
    wh.upsert(dataset, "amr", pl.DataFrame(rows))


PIPELINE = """
default_pipeline: p
warehouse: wh
run_dir: run
pipelines:
  p:
    datasets:
      nli:
        path: nli.tsv
        kind: triples
        columns: {{id: id, split: split}}
        translations: {{de: {{premise: premise_de, entailment: entailment_de, contradiction: contradiction_de}}}}
      dev: {{path: dev.tsv, kind: pairs, split: dev, score_range: [0, 5]}}
    parse: {{datasets: [nli, dev], backend: ud}}
    train:
      - method: mse_amr
        params: {{datasets: [nli], dev_dataset: dev, encoder: {encoder}, base_encoder: "hf:{encoder}#cls",
                  batch_size: 4, micro_batch: 4, epochs: 3, eval_every: 1, lr: 1.0e-3, max_length: 48,
                  min_count: 2, device: cpu}}
"""


@pytest.fixture
def project(tmp_path, write_tsv, write_config, tiny_bert):
    write_tsv("nli.tsv", NLI_HEADER, NLI_ROWS)
    write_tsv("dev.tsv", ["sentence1", "sentence2", "score"], DEV_ROWS)
    cfg = load_config(write_config(PIPELINE.format(encoder=tiny_bert)))
    wh = Warehouse(cfg.warehouse_root)
    for ds in ("nli", "dev"):
        ingest_stage(cfg.section("p"), ds, "r0")
    return cfg, wh


# --- training data -----------------------------------------------------------------------------------------------


def test_training_data_skips_failed_graph_and_uses_own_translation_graphs(project):
    from amrsim.stages.train.mse_amr import Params, load_triples

    _, wh = project
    write_amr(wh, "nli", pivot_langs={"de": "en"})  # German graphs are the English ones again: not a language
    data = load_triples(wh, Params(datasets=["nli"], split="train", parser="ud"))
    assert data.langs == ["en"] and data.rows == 5 and len(data.triples) == 4
    assert dict(data.skipped) == {"graph failed to parse": 1}  # t3: its entailment's graph failed
    assert data.per_dataset["nli"] == {"items": 5, "used": 4, "skipped": {"graph failed to parse": 1}}
    assert [i.split(":")[1] for i in data.item_ids] == ["t1", "t2", "t4", "t5"]
    first = data.triples[0]
    assert first["premise"]["en"] == {"text": "the boy wants the apple",
                                      "graph": "( wants-01 :ARG0 ( boy ) :ARG1 ( apple ) )"}

    wh2 = Warehouse(wh.root.parent / "wh2")  # the same data with German parsed directly
    for table in ("triples", "sentences", "parallel"):
        wh2.upsert("nli", table, wh.read("nli", table))
    write_amr(wh2, "nli")
    data = load_triples(wh2, Params(datasets=["nli"], split="train", parser="ud"))
    assert data.langs == ["en", "de"] and len(data.triples) == 5 and not data.skipped  # t3: a German graph
    assert data.triples[0]["contradiction"]["de"]["graph"] == "( will-01 :ARG0 ( junge ) :ARG1 ( apfel ) " \
                                                               ":ARG2 ( nicht ) )"
    english_only = load_triples(wh2, Params(datasets=["nli"], split="train", parser="ud", langs=["en"],
                                            require_graphs=False))
    assert len(english_only.triples) == 5 and set(english_only.triples[2]["entailment"]) == {"en"}
    assert english_only.triples[2]["entailment"]["en"]["graph"] is None  # t3 keeps its English text


# --- training through the warehouse --------------------------------------------------------------------------------


def _params(cfg, **over):
    from amrsim.methods import method_params

    return method_params("mse_amr", {**cfg.project.pipelines["p"].train[0].params, **over})


@pytest.mark.slow
def test_train_through_the_warehouse_then_resume(project):
    from amrsim.stages.train.mse_amr import train

    cfg, wh = project
    write_amr(wh, "nli", pivot_langs={"de": "en"})
    write_amr(wh, "dev")
    first = train(cfg.section("p"), _params(cfg, max_steps=1), "run1")
    assert first["status"] == "partial" and first["steps"] == 1 and first["total_steps"] == 3
    assert first["rows_in"] == 5 and first["computed"] == 4 and first["failed"] == 1
    assert first["left_out"] == {"graph failed to parse": 1} and first["model"] == "mse_amr:run1"
    assert first["contradiction_sources"] == {"given": 4}

    assert (wh.models_root / "mse_amr" / "run1" / "checkpoint").is_dir()
    done = train(cfg.section("p"), _params(cfg), "run1")  # the same run id resumes
    assert done["status"] == "ok" and done["resumed_from"] == 1 and done["steps"] == 3
    assert sorted(p.name for p in (wh.models_root / "mse_amr" / "run1").iterdir()) == [
        "amr_encoder", "config_sentence_transformers.json", "model.json", "modules.json"]
    meta = json.loads((wh.models_root / "mse_amr" / "run1" / "model.json").read_text())
    assert meta["pipeline"] == "p" and meta["parser"] == "ud" and meta["linearize"] == "paper"
    assert meta["table_versions"] == {"nli.triples": wh.version("nli", "triples"),
                                      "nli.parallel": wh.version("nli", "parallel"),
                                      "nli.amr": wh.version("nli", "amr"), "dev.pairs": wh.version("dev", "pairs"),
                                      "dev.amr": wh.version("dev", "amr")}
    assert meta["data"]["triples"] == 4 and meta["data"]["skipped"] == {"graph failed to parse": 1}
    assert meta["data"]["dev"]["pairs"] == 4 and meta["seeds"] == {"train": 0} and meta["seed"] == 0
    assert meta["metrics"]["completed"] and len(meta["metrics"]["dev_history"]) == 3
    assert meta["base_encoder"].startswith("hf:") and meta["integration"] == "concat"
    lineage = wh.read("meta", "lineage").filter(pl.col("stage") == "train:mse_amr")
    assert lineage.height == 2 and set(lineage["run_id"]) == {"run1"}
    assert json.loads(lineage["input_versions"][-1]) == meta["table_versions"]


def test_config_errors_before_training(project, write_config, tiny_bert):
    from amrsim.stages.train.mse_amr import train

    cfg, _ = project
    with pytest.raises(ConfigError, match=r"train.mse_amr.params.dev_dataset: unknown dataset 'nope'"):
        load_config(write_config(PIPELINE.format(encoder=tiny_bert).replace("dev_dataset: dev", "dev_dataset: nope"),
                                 "bad.yaml"))
    with pytest.raises(ConfigError, match="'dev' is kind 'pairs', needs 'triples'"):
        train(cfg.section("p"), _params(cfg, datasets=["dev"]), "bad")
    with pytest.raises(ConfigError, match="fewer than 2 usable triples"):  # not parsed yet
        train(cfg.section("p"), _params(cfg), "bad")


# --- the trained model as an encoder -----------------------------------------------------------------------------


def test_graph_aware_encoder(project):
    from amrsim.amr.linearize import linearize
    from amrsim.encoders import model_id
    from amrsim.methods.loaders import embed_sentences, load_encoder
    from amrsim.methods.mse_amr import combine
    from amrsim.stages.train.mse_amr import train

    cfg, wh = project
    write_amr(wh, "nli", pivot_langs={"de": "en"})
    write_amr(wh, "dev")
    train(cfg.section("p"), _params(cfg, epochs=1, dev_dataset=None), "run2")
    enc = load_encoder("mse_amr:latest", models_root=wh.models_root)
    assert type(enc).__name__ == "MseAmrEncoder" and enc.model_id.startswith("trained:mse_amr/run2@")
    assert model_id("mse_amr:latest", wh.models_root) == enc.model_id
    assert enc.dim == 32  # 16 (base) + 16 (graph)

    # an evaluated dataset: a graph in its amr table, one to parse now, a pivot through English, and no way at all
    texts = {"looked_up": ("en", "the boy wants the apple"), "parse_now": ("en", "A man is eating bread."),
             "pivot": ("de", "Ein Mann isst Brot."), "none": ("ja", "男がパンを食べる。")}
    keys = {name: content_key("sentence", lang, text) for name, (lang, text) in texts.items()}
    wh.upsert("ev", "sentences", pl.DataFrame([{"key": keys[n], "lang": lang, "text": t, "status": "ok",
                                                "error": None} for n, (lang, t) in texts.items()]))
    wh.upsert("ev", "parallel", pl.DataFrame([{
        "key": "p1", "item_id": "1:sentence1", "split": "test", "source_lang": "en", "target_lang": "de",
        "source_key": keys["parse_now"], "target_key": keys["pivot"], "source": texts["parse_now"][1],
        "target": texts["pivot"][1], "status": "ok", "error": None, "source_file": "f", "source_line": 2}]))
    graph = graph_of(texts["looked_up"][1])
    wh.upsert("ev", "amr", pl.DataFrame([{
        "key": "a1", "sentence_key": keys["looked_up"], "lang": "en", "penman": graph, "parser": "ud",
        "pivot_lang": None, "parsed_text": texts["looked_up"][1], "linearized": None, "status": "ok", "error": None,
        "seconds": 0.0}]))
    frame = pl.DataFrame({"key": list(keys.values()), "text": [t for _, t in texts.values()]})
    assert embed_sentences(wh, "ev", "mse_amr:latest", frame) == (4, 1)
    emb = wh.read("ev", "embeddings").filter(pl.col("encoder") == "mse_amr:run2")  # the run :latest resolved to
    row = {k: r for k, r in zip(emb["sentence_key"], emb.iter_rows(named=True), strict=True)}
    assert row[keys["none"]]["status"] == "failed" and row[keys["none"]]["vector"] is None
    assert (f"no AMR graph for sentence {keys['none']} (lang ja)" in row[keys["none"]]["error"]
            and "parse: with pivot" in row[keys["none"]]["error"])
    assert all(row[keys[n]]["status"] == "ok" and row[keys[n]]["dim"] == 32 for n in ("looked_up", "parse_now",
                                                                                     "pivot"))
    # the looked-up row is combine(base(text), graph encoder(linearised graph from the table))
    s = enc.base.encode([texts["looked_up"][1]])
    h = enc.graph_encoder.encode([linearize(graph)])
    np.testing.assert_allclose(row[keys["looked_up"]]["vector"], combine(s, h, "concat")[0], atol=1e-5)
    # the German sentence has the graph of its English source, parsed now: same graph part as the English row
    de, en = np.asarray(row[keys["pivot"]]["vector"]), np.asarray(row[keys["parse_now"]]["vector"])
    np.testing.assert_allclose(de[16:], en[16:], atol=1e-5)
    assert not np.allclose(de[:16], en[:16])
    # plain encode: texts parsed as English
    plain = enc.encode([texts["parse_now"][1]])
    np.testing.assert_allclose(plain[0], en, atol=1e-5)
    with pytest.raises(ValueError, match="no AMR graph"):
        enc.encode([""])


def test_a_vector_follows_the_graph_it_reads(project):
    """An `mse_amr:<run>` vector reads the sentence's graph (or its English source's): a changed `amr` row or English
    source is a new vector, the old one removed; nothing changed, nothing encoded (warehouse/README.md)."""
    from amrsim.amr.linearize import linearize
    from amrsim.methods.loaders import embed_sentences, load_encoder
    from amrsim.methods.mse_amr import combine
    from amrsim.stages.train.mse_amr import train

    cfg, wh = project
    write_amr(wh, "nli", pivot_langs={"de": "en"})
    train(cfg.section("p"), _params(cfg, epochs=1, dev_dataset=None), "run3")
    texts = {"boy": ("en", "the boy wants the apple"), "girl": ("en", "the girl eats the apple"),
             "de": ("de", "der junge will den apfel")}
    keys = {name: content_key("sentence", lang, text) for name, (lang, text) in texts.items()}
    wh.upsert("ev", "sentences", pl.DataFrame([{"key": keys[n], "lang": lang, "text": t, "status": "ok",
                                                "error": None} for n, (lang, t) in texts.items()]))

    def source(english: str) -> None:  # the German sentence's English source
        wh.sync("ev", "parallel", pl.DataFrame([{
            "key": english, "item_id": "1:sentence1", "split": "test", "source_lang": "en", "target_lang": "de",
            "source_key": keys[english], "target_key": keys["de"], "source": texts[english][1],
            "target": texts["de"][1], "status": "ok", "error": None, "source_file": "f", "source_line": 2}]))

    def graph(name: str, penman: str) -> None:
        wh.upsert("ev", "amr", pl.DataFrame([{
            "key": f"{name}:{penman}", "sentence_key": keys[name], "lang": "en", "penman": penman, "parser": "ud",
            "pivot_lang": None, "parsed_text": texts[name][1], "linearized": None, "status": "ok", "error": None,
            "seconds": 0.0}]))
        wh.delete_keys("ev", "amr", [k for k in wh.keys("ev", "amr") if k.startswith(f"{name}:")
                                     and k != f"{name}:{penman}"])

    frame = pl.DataFrame({"key": list(keys.values()), "text": [t for _, t in texts.values()]})
    source("boy")
    graph("boy", graph_of(texts["boy"][1]))
    graph("girl", graph_of(texts["girl"][1]))
    assert embed_sentences(wh, "ev", "mse_amr:run3", frame) == (3, 0)
    assert embed_sentences(wh, "ev", "mse_amr:run3", frame) == (0, 0)
    enc = load_encoder("mse_amr:run3", models_root=wh.models_root)

    def vectors() -> dict[str, np.ndarray]:
        emb = wh.read("ev", "embeddings").filter(pl.col("encoder") == "mse_amr:run3")
        assert emb["sentence_key"].is_unique().all()  # one vector per sentence: the current one
        return {k: np.asarray(v) for k, v in zip(emb["sentence_key"], emb["vector"], strict=True)}

    before = vectors()
    graph("boy", "(w / want-01 :polarity - :ARG0 (b / boy))")  # the English sentence's graph changes
    assert embed_sentences(wh, "ev", "mse_amr:run3", frame) == (2, 0)  # it and the German one reading it
    after = vectors()
    h = enc.graph_encoder.encode([linearize("(w / want-01 :polarity - :ARG0 (b / boy))")])
    np.testing.assert_allclose(after[keys["boy"]], combine(enc.base.encode([texts["boy"][1]]), h)[0], atol=1e-5)
    np.testing.assert_allclose(after[keys["de"]][16:], after[keys["boy"]][16:], atol=1e-5)
    np.testing.assert_allclose(after[keys["girl"]], before[keys["girl"]])
    source("girl")  # the German sentence gets another English source: it reads that one's graph
    assert embed_sentences(wh, "ev", "mse_amr:run3", frame) == (1, 0)
    np.testing.assert_allclose(vectors()[keys["de"]][16:], after[keys["girl"]][16:], atol=1e-5)
    assert embed_sentences(wh, "ev", "mse_amr:run3", frame) == (0, 0)


def test_an_sts_result_follows_the_graphs_its_vectors_read(project):
    """`mse_amr:<run>` STS results: a changed graph of an evaluated sentence is a new result (its vectors are new),
    equal to what the vectors now give; nothing changed, nothing computed."""
    from amrsim.config import StsEvalConfig
    from amrsim.encoders.cache import read_embeddings
    from amrsim.evaluate.sts import correlations, cosine
    from amrsim.stages import sts_stage
    from amrsim.stages.train.mse_amr import train

    cfg, wh = project
    write_amr(wh, "nli", pivot_langs={"de": "en"})
    write_amr(wh, "dev")
    train(cfg.section("p"), _params(cfg, epochs=1, dev_dataset=None), "run4")
    sts = StsEvalConfig(encoders=["mse_amr:run4"], datasets=["dev"], splits=["dev"], lang_pairs=["en-en"])

    def pearson() -> tuple[int, float, float]:
        run, rows = sts_stage(wh, "p", sts, "e")
        pairs = wh.read("dev", "pairs").filter(pl.col("status") == "ok")
        k1, k2 = pairs["sentence1_key"].to_list(), pairs["sentence2_key"].to_list()
        both = read_embeddings(wh, "dev", "mse_amr:run4", k1 + k2)
        direct = correlations(cosine(both[:len(k1)], both[len(k1):]), pairs["score"].to_numpy())["pearson"]
        return run.rows_computed, rows.filter(pl.col("metric") == "pearson")["value"][0], direct

    computed, stored, direct = pearson()
    assert computed == 1 and stored == pytest.approx(direct)
    amr = wh.read("dev", "amr")
    boy = amr.filter(pl.col("parsed_text") == DEV_ROWS[0][0])
    wh.upsert("dev", "amr", boy.with_columns(penman=pl.lit("(w / want-01 :polarity - :ARG0 (b / boy))")))
    computed, stored, direct = pearson()
    assert computed == 1 and stored == pytest.approx(direct)
    assert pearson()[0] == 0


def test_train_base_through_the_warehouse_and_as_an_encoder(project):
    """train_base: the triples keep every language's text (German here, whose graphs are pivots), the run writes
    its trained base as text_encoder/, and `mse_amr:<run>` embeds texts with that base (not the base's cache)."""
    from amrsim.methods.loaders import embed_sentences, load_encoder
    from amrsim.methods.mse_amr import combine
    from amrsim.stages.train.mse_amr import Params, load_triples, train

    cfg, wh = project
    write_amr(wh, "nli", pivot_langs={"de": "en"})
    write_amr(wh, "dev")
    data = load_triples(wh, Params(datasets=["nli"], split="train", parser="ud", train_base=True))
    assert data.langs == ["en"] and data.text_langs == ["en", "de"] and len(data.triples) == 4
    assert data.triples[0]["premise"]["de"] == {"text": "der junge will den apfel", "graph": None}
    assert load_triples(wh, Params(datasets=["nli"], split="train", parser="ud")).text_langs == []

    result = train(cfg.section("p"), _params(cfg, epochs=2, train_base=True, base_lr=1e-3), "tb")
    assert result["status"] == "ok"
    run = wh.models_root / "mse_amr" / "tb"
    meta = json.loads((run / "model.json").read_text())
    assert meta["text_encoder"] == "text_encoder" and meta["data"]["text_langs"] == ["en", "de"]
    assert (run / "text_encoder" / "modules.json").is_file()
    enc = load_encoder("mse_amr:tb", models_root=wh.models_root)
    assert enc.base_name is None and re.fullmatch(r"trained:mse_amr/tb@[0-9a-f]{16}#text", enc.base.model_id)
    sentences = wh.read("dev", "sentences").select("key", "text")
    embed_sentences(wh, "dev", "mse_amr:tb", sentences)
    emb = wh.read("dev", "embeddings")
    assert set(emb["encoder"]) == {"mse_amr:tb"}  # the trained base's vectors are only the run's
    row = emb.filter(pl.col("sentence_key") == sentences["key"][0])
    s = enc.base.encode([sentences["text"][0]])
    h = enc.graph_encoder.encode([next(iter(enc.graphs(wh, "dev", [sentences["key"][0]],
                                                       [sentences["text"][0]])))[0]])
    np.testing.assert_allclose(row["vector"][0].to_numpy(), combine(s, h, "concat")[0], atol=1e-5)


def test_length_chunks_give_the_same_embeddings_and_gradients(tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    from amrsim.methods.mse_amr.model import embed, embed_by_length

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert))
    model = AutoModel.from_pretrained(str(tiny_bert)).eval()
    texts = [graph_of(s) if i % 2 else s for i, row in enumerate(NLI_ROWS) for s in row[2:5]]
    grads = []
    for chunked in (False, True):
        model.zero_grad()
        emb = (embed_by_length(model, tokenizer, texts, "mlp", 48, torch.device("cpu"), 4) if chunked else
               embed(model, tokenizer, texts, "mlp", 48, torch.device("cpu")))
        (emb * torch.arange(emb.shape[0]).unsqueeze(1)).sum().backward()  # row order matters
        grads.append((emb.detach(), model.embeddings.word_embeddings.weight.grad.clone()))
    torch.testing.assert_close(grads[0][0], grads[1][0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(grads[0][1], grads[1][1], atol=1e-5, rtol=1e-4)
