"""Smatch: exact hand-computed scores, determinism, and never below the smatch 1.0.4 reference."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amrsim.amr.graph import AMRError, SmatchTriples, smatch_triples
from amrsim.metrics.smatch import SmatchScore, has_duplicates, smatch, smatch_many
from tests.helpers import ROOT, shared

BOY = "(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"  # 7 triples with TOP


def score(a: str, b: str, convention: str = "smatch", **kw) -> SmatchScore:
    return smatch(smatch_triples(a, convention), smatch_triples(b, convention), **kw)


def one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if not line.strip().startswith("#"))


def test_identical_graphs_score_one():
    for conv in ("smatch", "amr"):
        s = score(BOY, BOY, conv)
        assert (s.precision, s.recall, s.f1, s.matched, s.optimal) == (1.0, 1.0, 1.0, 7, True)


def test_identical_graphs_with_duplicates_and_renamed_variables():
    a = "(a / and :op1 (p / person) :op2 (p2 / person) :op3 (p3 / person) :op1 p :op1 p)"
    b = "(x / and :op1 (y / person) :op2 (z / person) :op3 (u / person) :op1 y :op1 y)"
    s = score(a, b)
    assert s.f1 == 1.0 and s.matched == s.n1 == 10


def test_negation_added():
    s = score(BOY, "(w / want-01 :polarity - :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))")
    assert (s.matched, s.n1, s.n2) == (7, 7, 8)
    assert s.precision == 1.0 and s.recall == 7 / 8 and s.f1 == pytest.approx(14 / 15)


def test_role_swapped():
    s = score(BOY, "(w / want-01 :ARG1 (b / boy) :ARG0 (g / go-02 :ARG0 b))")
    assert (s.matched, s.n1, s.n2) == (5, 7, 7)
    assert s.f1 == pytest.approx(5 / 7)


def test_concept_changed():
    s = score(BOY, "(w / want-01 :ARG0 (b / girl) :ARG1 (g / go-02 :ARG0 b))")
    assert s.matched == 6 and s.f1 == pytest.approx(6 / 7)


def test_root_concept_counts_twice_in_amr_convention():
    other = "(w / need-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"
    assert score(BOY, other, "smatch").matched == 6
    assert score(BOY, other, "amr").matched == 5


def test_empty_triples_score_zero():
    empty = SmatchTriples((), (), (), ())
    assert smatch(empty, smatch_triples(BOY)).f1 == 0.0


def test_same_seed_same_result_and_budget_flag():
    a = smatch_triples("(a / and" + "".join(f" :op{i} (p{i} / person :ARG0-of (h{i} / have-01))" for i in range(9))
                       + ")")
    b = smatch_triples("(a / and" + "".join(f" :op{i} (p{i} / person :ARG1-of (h{i} / have-01))" for i in range(9))
                       + ")")
    runs = [smatch(a, b, seed=7) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    tiny = smatch(a, b, seed=7, node_budget=0)  # hill-climbing only: nothing proved
    assert not tiny.optimal and tiny.matched <= runs[0].matched
    assert smatch_many([(a, b), (b, a)], seed=7)[0] == runs[0]


def _examples() -> list[tuple[str, str]]:
    def blocks(path: Path) -> list[str]:
        return [b for b in path.read_text(encoding="utf-8").split("\n\n") if one_line(b).strip()]

    root = shared("amr_examples")
    pairs = []
    for a, b in [("flipz357_amr-metric-suite_examples_a.txt", "flipz357_amr-metric-suite_examples_b.txt"),
                 ("mdtux89_amr-evaluation_test_input1.txt", "mdtux89_amr-evaluation_test_input2.txt")]:
        pairs += list(zip(blocks(root / a), blocks(root / b), strict=True))
    return pairs


def _reference(a: str, b: str) -> tuple[int, int, int]:
    ref = pytest.importorskip("smatch")
    ref.match_triple_dict.clear()
    return ref.get_amr_match(one_line(a), one_line(b))


def test_agrees_with_reference_on_examples():
    compared = 0
    for a, b in _examples():
        try:
            ours = score(a, b)
        except AMRError as e:  # one hand-written example refers to an undefined variable `e`
            assert "undefined variable e" in str(e)
            continue
        compared += 1
        m, n1, n2 = _reference(a, b)
        assert (ours.n1, ours.n2) == (n1, n2)
        assert ours.optimal
        assert ours.matched >= m
        if ours.matched == m:  # the reference found the optimum: same F1
            ref_f = 2 * m / (n1 + n2)
            assert ours.f1 == pytest.approx(ref_f)
    assert compared >= 8


@pytest.mark.integration
def test_never_below_reference_on_bamboo():
    path = shared("amr_bamboo", "bamboo_sts_main_test.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(200), f, strict=False)]
    below = []
    for row in rows:
        m, n1, n2 = _reference(row["amr1"], row["amr2"])
        t1, t2 = smatch_triples(row["amr1"], "smatch"), smatch_triples(row["amr2"], "smatch")
        ours = smatch(t1, t2)
        assert (ours.n1, ours.n2) == (n1, n2)
        if ours.matched < m:
            below.append(row["idx"])
            assert has_duplicates(t1) or has_duplicates(t2), f"pair {row['idx']} below the reference"
    assert len(below) <= 5


@pytest.mark.slow
def test_deterministic_across_processes():
    code = (
        "from amrsim.amr.graph import smatch_triples as t\n"
        "from amrsim.metrics.smatch import smatch\n"
        "a = t('(a / and' + ''.join(f' :op{i} (p{i} / person :ARG0-of (h{i} / have-01 :ARG1 (x{i} / x)))'"
        " for i in range(8)) + ')')\n"
        "b = t('(a / and' + ''.join(f' :op{i} (p{i} / person :ARG1-of (h{i} / have-01 :ARG0 (x{i} / x)))'"
        " for i in range(8)) + ')')\n"
        "print([smatch(a, b, seed=s, node_budget=50) for s in range(3)])\n"
    )
    outs = set()
    for hashseed in ("1", "2", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=60, check=True)
        outs.add(res.stdout)
    assert len(outs) == 1


def reference_tables(t1: SmatchTriples, t2: SmatchTriples):
    """The pair tables as the Python encoder built them before the C one (the oracle for `encode_pair`): U, quads
    in insertion order, and per node its concept id (pair-local ids; graph 1's nodes without one get 0, graph 2's
    -1)."""
    def norm(x: str) -> str:
        return x.lower().rstrip("_")

    def encode(t):
        index = {v: i for i, v in enumerate(t.variables)}
        unary, binary, concepts = {}, {}, []
        for v, c in t.instances:
            concepts.append((index[v], norm(c)))
            unary[(index[v], "i", norm(c))] = unary.get((index[v], "i", norm(c)), 0) + 1
        for v, r, c in t.attributes:
            key = (index[v], norm(r), "=" + norm(c))
            unary[key] = unary.get(key, 0) + 1
        for s, r, o in t.relations:
            key = (index[s], "s", norm(r)) if index[s] == index[o] else (index[s], index[o], norm(r))
            table = unary if index[s] == index[o] else binary
            table[key] = table.get(key, 0) + 1
        return len(index), unary, binary, concepts

    n1, u1, b1, con1 = encode(t1)
    n2, u2, b2, con2 = encode(t2)
    U = [0] * (n1 * n2)
    for (i, kind, label), c1 in u1.items():
        for (j, kind2, label2), c2 in u2.items():
            if (kind, label) == (kind2, label2):
                U[i * n2 + j] += min(c1, c2)
    quads: dict = {}
    for (i, k, r), c1 in b1.items():
        for (j, y, r2), c2 in b2.items():
            if r == r2:
                key = (i, j, k, y) if i < k else (k, y, i, j)
                quads[key] = quads.get(key, 0) + min(c1, c2)
    ids: dict = {}
    cid1, cid2 = [0] * n1, [-1] * n2
    for i, c in con1:
        cid1[i] = ids.setdefault(c, len(ids))
    for j, c in con2:
        cid2[j] = ids.setdefault(c, len(ids))
    return n1, n2, U, [(*k, w) for k, w in quads.items()], cid1, cid2


def c_tables(t1: SmatchTriples, t2: SmatchTriples):
    from array import array

    from amrsim.metrics.smatch import encode_pair

    n1, n2, U, q, c1, c2 = (x if isinstance(x, int) else array("i", x).tolist() for x in encode_pair(t1, t2))
    return n1, n2, U, [tuple(q[i:i + 5]) for i in range(0, len(q), 5)], c1, c2


def assert_same_tables(t1: SmatchTriples, t2: SmatchTriples) -> None:
    ref, fast = reference_tables(t1, t2), c_tables(t1, t2)
    assert fast[:4] == ref[:4]  # node counts, U and the quads in the same order
    # concept ids differ in value; the search only compares them (graph 1's against graph 2's)
    assert [[a == b for b in fast[5]] for a in fast[4]] == [[a == b for b in ref[5]] for a in ref[4]]


def test_pair_tables_equal_the_python_encoding_on_hand_cases():
    dup = SmatchTriples(("a", "b"), (("a", "Want-01_"), ("b", "boy")),
                        (("a", "TOP", "top"), ("a", "polarity", "-"), ("a", "polarity", "-"), ("b", "i", "x")),
                        (("a", "ARG0", "b"), ("a", "arg0", "b"), ("a", "ARG1", "a"), ("b", "mod", "a")))
    other = SmatchTriples(("x", "y", "z"), (("x", "want-01"), ("y", "boy"), ("z", "=x")),
                          (("x", "TOP", "top"), ("x", "polarity", "-"), ("y", "s", "arg1")),
                          (("x", "ARG0", "y"), ("x", "ARG1", "x"), ("y", "MOD", "x"), ("z", "ARG0", "y")))
    no_concept = SmatchTriples(("p", "q"), (("q", "boy"),), (("p", "TOP", "top"),), (("p", "ARG0", "q"),))
    for a, b in [(dup, other), (other, dup), (dup, dup), (no_concept, other), (other, no_concept),
                 (no_concept, no_concept)]:
        assert_same_tables(a, b)
    assert smatch(dup, dup).f1 == 1.0


def test_pair_tables_equal_the_python_encoding_on_bamboo():
    path = shared("amr_bamboo", "bamboo_sts_main_test.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][:300]
    for conv in ("smatch", "amr"):
        for r in rows:
            assert_same_tables(smatch_triples(r["amr1"], conv), smatch_triples(r["amr2"], conv))


def test_a_new_label_table_mid_pair_re_encodes_both(monkeypatch):
    from amrsim.metrics import smatch as smatch_module

    a, b = smatch_triples(BOY), smatch_triples("(w / want-01 :ARG0 (g / girl))")
    expected = smatch(a, b)
    e1 = smatch_module.encode_graph(a)
    monkeypatch.setattr(smatch_module, "MAX_LABELS", 0)  # every encoding now starts a new table
    e2 = smatch_module.encode_graph(b)
    assert e1.labels is not e2.labels
    assert smatch(a, b, encoded=(e1, e2)) == expected


@pytest.mark.parametrize("text", [BOY, "(a / b~e.1 :ARG0 (c / d))", '(a / b :op1 "x y" :mod "z" :ARG0-of (c / d))'])
def test_encode_text_equals_encoding_the_read_triples(text):
    """encode_text skips building SmatchTriples where the C reader takes the text (the second text takes the Python
    path); the encoding is the same either way, and errors are read_triples' own."""
    from amrsim.amr.graph import read_triples
    from amrsim.metrics.smatch import Labels, encode_graph, encode_text

    for convention in ("smatch", "amr"):
        labels = Labels()
        fast = encode_text(text, convention, labels)
        assert fast == encode_graph(read_triples(text, convention), labels)
        assert fast.triples == len(read_triples(text, convention))
    with pytest.raises(AMRError, match="unbalanced"):
        encode_text("(a / b", "smatch")


def test_align_many_gives_smatch_encoded_numbers_on_bamboo_on_any_number_of_threads():
    """The batch form (one C call, searches on threads without the GIL) gives smatch_encoded's precision, recall,
    F1 and optimality on real pairs, seeds and budgets included, whatever the threads; an empty graph scores 0 and
    graphs of two tables are refused."""
    from amrsim.metrics import _smatch_core
    from amrsim.metrics.smatch import Labels, align_many, encode_text, smatch_encoded

    path = shared("amr_bamboo", "bamboo_para_main_test.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][:150]
    first = [encode_text(r["amr1"], "smatch") for r in rows]
    second = [encode_text(r["amr2"], "smatch") for r in rows]
    for seed, node_budget in ((0, 200_000), (7, 50)):
        expected = [smatch_encoded(e1, e2, seed=seed, node_budget=node_budget)
                    for e1, e2 in zip(first, second, strict=True)]
        for threads in (1, 2, 5):
            got = align_many(first, second, seed=seed, node_budget=node_budget, threads=threads)
            assert [g[:4] for g in got] == [(s.precision, s.recall, s.f1, s.optimal) for s in expected]
            assert all(g[4] >= 0.0 for g in got)
    assert any(not g[3] for g in align_many(first, second, node_budget=50)), "the small budget cuts some search"
    empty = encode_text("(a / b)", "smatch")._replace(nodes=0)
    assert align_many([empty, first[0]], [encode_text(BOY, "smatch"), second[0]], threads=2)[0] == \
        (0.0, 0.0, 0.0, True, 0.0)
    assert align_many([], [], threads=2) == []
    with pytest.raises(ValueError, match="pair 0's graphs were encoded with different label tables"):
        align_many([encode_text(BOY, "smatch", Labels())], [encode_text(BOY, "smatch", Labels())])
    with pytest.raises(ValueError, match="differ in length"):
        align_many(first[:2], second[:1])
    with pytest.raises(TypeError, match="encoded graph"):
        _smatch_core.align_many([b"x"], [first[0].data], 0, 4, 10, 10, 2)
    with pytest.raises(ValueError, match="differ in length"):
        _smatch_core.align_many([first[0].data], [], 0, 4, 10, 10, 2)


def test_align_texts_gives_smatch_encoded_numbers_from_the_texts_on_any_number_of_threads():
    """Reading, encoding (a label table per pair) and aligning in one C call gives the numbers of encode_text and
    smatch_encoded with the process's table, both conventions, seeds and budgets, whatever the threads; the pairs the
    C reader does not take (not ASCII, not str, not read by it, empty) come back None for the Python path."""
    from amrsim.metrics import _smatch_core
    from amrsim.metrics.smatch import align_texts, encode_text, smatch_encoded

    path = shared("amr_bamboo", "bamboo_para_main_test.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][:150]
    texts1, texts2 = [r["amr1"] for r in rows], [r["amr2"] for r in rows]
    for convention, seed, node_budget in (("smatch", 0, 200_000), ("amr", 0, 200_000), ("smatch", 7, 50)):
        expected = [smatch_encoded(encode_text(a, convention), encode_text(b, convention), seed=seed,
                                   node_budget=node_budget) for a, b in zip(texts1, texts2, strict=True)]
        ascii = [a.isascii() and b.isascii() for a, b in zip(texts1, texts2, strict=True)]
        assert sum(ascii) > 140
        for threads in (1, 2, 5):
            got = align_texts(texts1, texts2, convention, seed=seed, node_budget=node_budget, threads=threads)
            assert [g and g[:4] for g in got] == [(s.precision, s.recall, s.f1, s.optimal) if fits else None
                                                  for s, fits in zip(expected, ascii, strict=True)]
            assert all(g[4] > 0.0 for g in got if g)
    assert any(g and not g[3] for g in align_texts(texts1, texts2, "smatch", node_budget=50)), "a search is cut"
    left = ["(c / café)", None, "(a / b", "", "(a / b :ARG0 (a / c))", "(a / b :op1 x~e.1)", 7]
    got = align_texts([BOY] * len(left) + left, left + [BOY] * len(left), "smatch", threads=2)
    assert got == [None] * (2 * len(left))
    assert align_texts([BOY], [BOY], "smatch")[0][:4] == (1.0, 1.0, 1.0, True)
    assert align_texts([], [], threads=2) == []
    assert align_texts([BOY], [BOY], "unknown") == [None]
    with pytest.raises(ValueError, match="differ in length"):
        align_texts([BOY, BOY], [BOY])
    with pytest.raises(ValueError, match="align_texts: the two lists differ in length"):
        _smatch_core.align_texts([BOY], [], True, 0, 4, 10, 10, 2)
    with pytest.raises(TypeError, match="align_texts"):
        _smatch_core.align_texts((BOY,), (BOY,), True, 0, 4, 10, 10, 2)


def _random_triples(rng, nodes: int) -> SmatchTriples:
    """A graph of `nodes` nodes over three concepts and three roles: many alignments tie or nearly tie, so the branch
    and bound has to branch and prune, while a node is a candidate for only some nodes of the other graph."""
    variables = tuple(f"v{i}" for i in range(nodes))
    instances = tuple((v, rng.choice("xyz")) for v in variables)
    relations = tuple({(rng.choice(variables), rng.choice(("r", "s", "t")), rng.choice(variables))
                       for _ in range(nodes + 2)})
    attributes = tuple((v, "mod", "z") for v in variables if rng.random() < 0.3)
    return SmatchTriples(variables, instances, attributes, relations)


def _best_by_enumeration(n1: int, n2: int, unary: list[int], quads: list[tuple[int, ...]]) -> int:
    """The optimum of the alignment problem by trying every injective partial mapping (each quad counted when its
    later node is mapped)."""
    later: dict[int, list[tuple[int, int, int, int]]] = {}
    for a, b, c, d, w in quads:
        if a < c:
            later.setdefault(c, []).append((a, b, d, w))
        else:
            later.setdefault(a, []).append((c, d, b, w))
    mapping, used, best = [-1] * n1, [False] * n2, 0

    def walk(i: int, score: int) -> None:
        nonlocal best
        if i == n1:
            best = max(best, score)
            return
        walk(i + 1, score)
        for j in range(n2):
            if not used[j]:
                gain = unary[i * n2 + j] + sum(w for a, b, d, w in later.get(i, ()) if mapping[a] == b and d == j)
                mapping[i], used[j] = j, True
                walk(i + 1, score + gain)
                mapping[i], used[j] = -1, False

    walk(0, 0)
    return best


def test_search_finds_the_optimum_that_enumeration_finds():
    """The branch and bound's bound (and the bounds it carries over from the parent node) must never cut off a better
    alignment: from a weak start (no random restarts) and from the default one it proves optimality, and its score
    is the enumerated optimum, on random graphs full of near ties. (A bound that forgets the pairs a step makes
    exact, or halves what later nodes can add, fails here on several of these graphs.)"""
    import array
    import random

    from amrsim.metrics import _smatch_core
    from amrsim.metrics.smatch import encode_pair

    rng = random.Random(0)
    for case in range(300):
        t1, t2 = _random_triples(rng, rng.randint(4, 7)), _random_triples(rng, rng.randint(4, 7))
        n1, n2, unary, quads, conc1, conc2 = encode_pair(t1, t2)
        u, q = array.array("i", unary).tolist(), array.array("i", quads).tolist()
        expected = _best_by_enumeration(n1, n2, u, [tuple(q[k:k + 5]) for k in range(0, len(q), 5)])
        for restarts in (0, 4):
            best, optimal, _expanded, _work, _mapping = _smatch_core.align(
                n1, n2, unary, quads, conc1, conc2, case, restarts, 10**7, 10**9)
            assert optimal, f"case {case}: search not finished"
            assert best == expected, f"case {case}, restarts {restarts}: {best} != optimum {expected}"
