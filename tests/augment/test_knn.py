"""kNN augmentation: hand-computed neighbours on tiny 2-D sets, pair building, scorer faults, approximate indexes."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from amrsim.augment import KINDS, CallableScorer, CosineScorer, augment_pairs, build_index, knn, normalise, recall_at_k
from amrsim.augment.knn import PAIR_SCHEMA, default_nlist, search
from amrsim.warehouse.keys import content_key

# Five points on rays at these angles (degrees), with different lengths so normalisation matters. Every pairwise
# angle differs, so each row's neighbour order is unambiguous:
#   row 0: 1 (10), 2 (30), 3 (65), 4 (110)      row 1: 0 (10), 2 (20), 3 (55), 4 (100)
#   row 2: 1 (20), 0 (30), 3 (35), 4 (80)       row 3: 2 (35), 4 (45), 1 (55), 0 (65)
#   row 4: 3 (45), 2 (80), 1 (100), 0 (110)
ANGLES = [0, 10, 30, 65, 110]
RADII = [1.0, 2.0, 0.5, 3.0, 7.0]
X = np.array([[r * math.cos(math.radians(a)), r * math.sin(math.radians(a))]
              for a, r in zip(ANGLES, RADII, strict=True)])
NEIGHBOURS = [[1, 2, 3, 4], [0, 2, 3, 4], [1, 0, 3, 4], [2, 4, 1, 0], [3, 2, 1, 0]]
KEYS = ["e", "d", "c", "b", "a"]  # reverse order, so pair orientation follows keys, not row numbers


def cosd(deg: float) -> float:
    return math.cos(math.radians(deg))


def clustered(n: int = 2000, dim: int = 32, centres: int = 40, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, dim))
    return (c[rng.integers(0, centres, n)] + 0.35 * rng.normal(size=(n, dim))).astype(np.float32)


# --- knn ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_knn_hand_computed_neighbours_and_cosines(kind):
    scores, idx = knn(X, 4, kind)
    assert scores.dtype == np.float32 and idx.dtype == np.int64 and idx.shape == (5, 4)
    assert idx.tolist() == NEIGHBOURS
    for i, row in enumerate(NEIGHBOURS):
        expected = [cosd(abs(ANGLES[i] - ANGLES[j])) for j in row]
        np.testing.assert_allclose(scores[i], expected, atol=1e-6)


def test_knn_excludes_self_and_can_keep_it():
    _, idx = knn(X, 1)
    assert idx[:, 0].tolist() == [1, 0, 1, 2, 3]
    scores, idx = knn(X, 2, exclude_self=False)
    assert idx[:, 0].tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(scores[:, 0], 1.0, atol=1e-6)
    assert idx[:, 1].tolist() == [1, 0, 1, 2, 3]


def test_knn_duplicate_vectors_are_neighbours_of_each_other():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [-1.0, 0.2]])
    scores, idx = knn(x, 1)
    assert idx[:, 0].tolist() == [2, 3, 0, 1]
    np.testing.assert_allclose(scores[[0, 2], 0], 1.0, atol=1e-6)


def test_knn_many_identical_vectors_never_return_self():
    # seven tied copies: a row's own id may fall outside the k+1 returned, then the last result is dropped instead
    x = np.tile([[3.0, 4.0]], (7, 1))
    scores, idx = knn(x, 3)
    for i in range(7):
        assert i not in idx[i].tolist()
        assert len(set(idx[i].tolist())) == 3 and (idx[i] >= 0).all()
    np.testing.assert_allclose(scores, 1.0, atol=1e-6)


class ScriptedIndex:
    """Stands in for a faiss index whose (approximate) results are given: self missing, -1 padding."""

    ntotal = 3

    def search(self, q, k):
        ids = np.array([[2, 1, -1], [1, 0, 2], [0, -1, -1]])[:, :k]
        scores = np.array([[0.9, 0.5, -3e38], [1.0, 0.7, 0.2], [0.4, -3e38, -3e38]], dtype=np.float32)[:, :k]
        return scores, ids


def test_search_drops_self_or_else_the_last_result():
    scores, idx = search(ScriptedIndex(), np.zeros((3, 2)), 2)
    # row 0: self absent, its last (-1) dropped; row 1: self first; row 2: self absent, last dropped
    assert idx.tolist() == [[2, 1], [0, 2], [0, -1]]
    np.testing.assert_allclose(scores, [[0.9, 0.5], [0.7, 0.2], [0.4, np.nan]], atol=1e-6)
    # one shorter: row 0 keeps its best result, not its worst
    assert search(ScriptedIndex(), np.zeros((3, 2)), 1)[1].tolist() == [[2], [0], [0]]


def test_cosines_stay_within_minus_one_and_one():
    x = np.random.default_rng(5).normal(size=(200, 24))
    scores, idx = knn(np.vstack([x, -x]), 3, exclude_self=False)
    assert (idx[:, 0] == np.arange(400)).all()
    assert np.abs(scores).max() <= 1.0


def test_knn_k_beyond_n_minus_1_fills_minus_one_and_nan():
    x = X[:3]
    scores, idx = knn(x, 4)
    assert idx.tolist() == [[1, 2, -1, -1], [0, 2, -1, -1], [1, 0, -1, -1]]
    assert np.isnan(scores[:, 2:]).all()
    assert np.isfinite(scores[:, :2]).all()


def test_single_vector_has_no_neighbours():
    scores, idx = knn(np.array([[1.0, 2.0]]), 2)
    assert idx.tolist() == [[-1, -1]] and np.isnan(scores).all()


@pytest.mark.parametrize("kind", ["exact", "hnsw"])
def test_chunked_search_equals_one_shot(kind):
    x = np.random.default_rng(3).normal(size=(300, 16))
    s1, i1 = knn(x, 5, kind, chunk_size=37)
    s2, i2 = knn(x, 5, kind, chunk_size=10_000)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_allclose(s1, s2, atol=1e-5)


def test_search_needs_one_query_per_item_to_exclude_self():
    index = build_index(X)
    with pytest.raises(ValueError, match="5 indexed"):
        search(index, normalise(X[:2]), 1)
    _, idx = search(index, normalise(X[:2]), 1, exclude_self=False)
    assert idx[:, 0].tolist() == [0, 1]


def test_build_index_normalises_a_copy():
    x = X.astype(np.float32)
    before = x.copy()
    index = build_index(x)
    np.testing.assert_array_equal(x, before)
    assert index.ntotal == 5
    np.testing.assert_allclose(np.linalg.norm(index.reconstruct_n(0, 5), axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_indexes_recall_and_determinism(kind):
    x = clustered()
    _, exact = knn(x, 10)
    s1, approx1 = knn(x, 10, kind)
    s2, approx2 = knn(x, 10, kind)
    assert recall_at_k(approx1, exact) >= 0.9
    np.testing.assert_array_equal(approx1, approx2)
    np.testing.assert_array_equal(s1, s2)
    assert not (approx1 == np.arange(len(x))[:, None]).any()


def test_ivf_options():
    x = clustered(500)
    index = build_index(x, "ivf", ivf_nlist=8, ivf_nprobe=3)
    assert index.nlist == 8 and index.nprobe == 3
    assert build_index(x, "ivf", ivf_nlist=4, ivf_nprobe=16).nprobe == 4  # nprobe is capped at nlist
    assert build_index(x, "hnsw", ef_search=64).hnsw.efSearch == 64
    with pytest.raises(ValueError, match="exceeds"):
        build_index(x[:10], "ivf", ivf_nlist=11)


def test_default_nlist():
    assert default_nlist(100_000) == 1265  # 4 * sqrt(n)
    assert default_nlist(2000) == 51  # capped at n // 39
    assert default_nlist(10) == 1


def test_ivf_with_a_single_list_is_exact():
    x = np.random.default_rng(1).normal(size=(60, 8))
    _, exact = knn(x, 4)
    _, ivf = knn(x, 4, "ivf")
    np.testing.assert_array_equal(ivf, exact)


# --- bad input ---------------------------------------------------------------------------------------------------


def test_nan_and_inf_rows_are_named():
    x = X.copy()
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match="row 3 holds NaN or inf"):
        knn(x, 2)
    x = X.copy()
    x[1, 0] = np.inf
    with pytest.raises(ValueError, match="row 1 holds NaN or inf"):
        build_index(x)


def test_zero_vector_is_named():
    x = X.copy()
    x[2] = 0.0
    with pytest.raises(ValueError, match="row 2 is a zero vector"):
        knn(x, 2, "hnsw")


def test_huge_finite_values_do_not_overflow():
    x = np.array([[3e38, 0.0], [3e38, 1e38], [0.0, 1.0]], dtype=np.float32)
    scores, idx = knn(x, 1)
    assert idx[:, 0].tolist() == [1, 0, 1]
    np.testing.assert_allclose(scores[:, 0], [3 / math.sqrt(10), 3 / math.sqrt(10), 1 / math.sqrt(10)], atol=1e-6)


def test_unknown_kind_lists_the_kinds():
    with pytest.raises(ValueError, match="exact, hnsw, ivf"):
        knn(X, 2, "lsh")
    with pytest.raises(ValueError, match="'lsh'"):
        build_index(X, "lsh")


@pytest.mark.parametrize("bad", [np.zeros((0, 4)), np.zeros((3, 0)), np.ones(4)])
def test_empty_or_wrongly_shaped_input(bad):
    with pytest.raises(ValueError):
        build_index(bad)


def test_bad_k():
    for k in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must be a positive integer"):
            knn(X, k)


# --- augment_pairs -----------------------------------------------------------------------------------------------


def test_augment_pairs_unordered_dedup_rank_and_cosine():
    df = augment_pairs(KEYS, X, 2)
    assert df.schema == pl.Schema(PAIR_SCHEMA)
    # rows (i, j) -> best rank: (0,1) 1, (0,2) 2, (1,2) 1, (2,3) 1, (3,4) 1, (2,4) 2
    expected = {("d", "e"): (1, 10), ("c", "e"): (2, 30), ("c", "d"): (1, 20),
                ("b", "c"): (1, 35), ("a", "b"): (1, 45), ("a", "c"): (2, 80)}
    got = {(r["sentence1_key"], r["sentence2_key"]): r for r in df.iter_rows(named=True)}
    assert set(got) == set(expected)
    assert df.height == 6  # each unordered pair once, though most were found from both ends
    assert df.select("sentence1_key", "sentence2_key").rows() == sorted(expected)
    for pair, (rank, angle) in expected.items():
        row = got[pair]
        assert row["rank"] == rank
        assert row["cosine"] == pytest.approx(cosd(angle), abs=1e-6)
        assert row["weak_label"] == row["cosine"]
        assert (row["scorer"], row["k"], row["index_kind"], row["status"], row["error"]) == (
            "cosine:biencoder", 2, "exact", "ok", None)
        assert row["key"] == content_key("augmented_pair", list(pair), "cosine:biencoder", 2, "exact")


def test_augment_pairs_excludes_labelled_pairs_in_either_order():
    df = augment_pairs(KEYS, X, 2, labelled={("e", "d"), ("c", "d"), ("x", "y")})
    pairs = set(df.select("sentence1_key", "sentence2_key").rows())
    assert pairs == {("c", "e"), ("b", "c"), ("a", "b"), ("a", "c")}


def test_augment_pairs_all_labelled_gives_an_empty_typed_frame():
    everything = set(augment_pairs(KEYS, X, 2).select("sentence1_key", "sentence2_key").rows())
    df = augment_pairs(KEYS, X, 2, labelled=everything)
    assert df.height == 0 and df.schema == pl.Schema(PAIR_SCHEMA)


def test_augment_pairs_k_beyond_n_skips_missing_neighbours():
    df = augment_pairs(["p", "q", "r"], X[:3], 5)
    assert df.select("sentence1_key", "sentence2_key", "rank").rows() == [("p", "q", 1), ("p", "r", 2), ("q", "r", 1)]


def test_augment_pairs_duplicate_vectors_pair_up():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    df = augment_pairs(["a", "b", "c"], x, 1)
    row = df.filter(pl.col("sentence1_key") == "a", pl.col("sentence2_key") == "c").row(0, named=True)
    assert row["cosine"] == pytest.approx(1.0) and row["rank"] == 1


def test_augment_pairs_key_depends_on_scorer_k_and_kind():
    a = augment_pairs(KEYS, X, 2)["key"].to_list()
    assert len(set(a)) == len(a)
    assert set(a).isdisjoint(augment_pairs(KEYS, X, 2, kind="hnsw")["key"].to_list())
    assert set(a).isdisjoint(augment_pairs(KEYS, X, 2, scorer=CosineScorer("muse"))["key"].to_list())
    assert set(a).isdisjoint(augment_pairs(KEYS, X, 3)["key"].to_list())


def test_duplicate_sentence_key_is_named():
    with pytest.raises(ValueError, match="duplicate sentence key 'c'"):
        augment_pairs(["a", "c", "b", "c", "d"], X, 2)
    with pytest.raises(ValueError, match="4 keys for 5 vectors"):
        augment_pairs(KEYS[:4], X, 2)


def test_callable_scorer_gets_index_pairs_aligned_with_the_keys():
    seen: list[tuple[int, int]] = []

    def fn(pairs):
        seen.extend(pairs)
        return [10 * i + j for i, j in pairs]

    df = augment_pairs(KEYS, X, 2, scorer=CallableScorer("xenc:test", fn))
    assert len(seen) == df.height
    for row in df.iter_rows(named=True):
        i, j = KEYS.index(row["sentence1_key"]), KEYS.index(row["sentence2_key"])
        assert row["weak_label"] == 10 * i + j
        assert row["status"] == "ok" and row["scorer"] == "xenc:test"


def test_cosine_scorer_score_matches_knn_cosines():
    scorer = CosineScorer("muse", vectors=X)
    assert scorer.name == "cosine:muse"
    np.testing.assert_allclose(scorer.score([(0, 1), (3, 4), (0, 4)]), [cosd(10), cosd(45), cosd(110)], atol=1e-6)
    with pytest.raises(ValueError, match="needs the vectors"):
        CosineScorer().score([(0, 1)])


def test_raising_scorer_fails_rows_with_the_reason():
    def boom(pairs):
        raise RuntimeError("model not loaded")

    df = augment_pairs(KEYS, X, 2, scorer=CallableScorer("xenc", boom))
    assert df.height == 6  # rows are kept
    assert set(df["status"]) == {"failed"}
    assert df["weak_label"].null_count() == 6
    assert set(df["error"]) == {"scorer 'xenc' raised RuntimeError: model not loaded"}
    np.testing.assert_allclose(df["cosine"].to_numpy(), augment_pairs(KEYS, X, 2)["cosine"].to_numpy())


def test_wrong_length_scorer_fails_rows():
    df = augment_pairs(KEYS, X, 2, scorer=CallableScorer("short", lambda pairs: [0.5] * (len(pairs) - 1)))
    assert set(df["status"]) == {"failed"}
    assert set(df["error"]) == {"scorer 'short' returned shape (5,) for 6 pairs"}


def test_scorer_failure_is_limited_to_its_batch_and_non_finite_rows():
    def fn(pairs):
        if (KEYS.index("a"), KEYS.index("b")) in pairs:  # the (a, b) pair: rows (4, 3)
            raise ValueError("bad batch")
        return [float("nan") if (i, j) == (1, 0) else 0.25 for i, j in pairs]

    df = augment_pairs(KEYS, X, 2, scorer=CallableScorer("x", fn), score_batch_size=2)
    by_pair = {(r["sentence1_key"], r["sentence2_key"]): r for r in df.iter_rows(named=True)}
    # sorted pairs in batches of two: [(a,b), (a,c)] [(b,c), (c,d)] [(c,e), (d,e)]
    assert by_pair[("a", "b")]["error"] == by_pair[("a", "c")]["error"] == "scorer 'x' raised ValueError: bad batch"
    assert by_pair[("d", "e")]["status"] == "failed" and "non-finite" in by_pair[("d", "e")]["error"]
    assert by_pair[("d", "e")]["weak_label"] is None
    for pair in [("b", "c"), ("c", "d"), ("c", "e")]:
        assert by_pair[pair]["status"] == "ok" and by_pair[pair]["weak_label"] == 0.25


# --- recall ------------------------------------------------------------------------------------------------------


def test_recall_at_k_hand_computed():
    assert recall_at_k(np.array([[1, 2], [3, -1]]), np.array([[1, 3], [3, 4]])) == 0.5
    assert recall_at_k(np.array([[1, 5], [7, 8]]), np.array([[1, -1], [7, 9]])) == pytest.approx(0.75)
    assert recall_at_k(np.array([[2, 1]]), np.array([[1, 2]])) == 1.0
    assert math.isnan(recall_at_k(np.array([[1]]), np.array([[-1]])))
    with pytest.raises(ValueError):
        recall_at_k(np.array([[1]]), np.array([[1], [2]]))
