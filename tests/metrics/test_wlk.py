"""WLK / WWLK: hand-computed kernel values, identity, determinism across processes, BAMBOO sanity."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from amrsim.metrics.vectors import FileVectors, label_words, load_node_vectors
from amrsim.metrics.wlk import build, wlk, wlk_batch, wwlk, wwlk_batch
from tests.helpers import ROOT, shared

WANT_BOY = "(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-02 :ARG0 b))"
WANT_GIRL = "(w / want-01 :ARG0 (x / girl) :ARG1 (g / go-02 :ARG0 x))"
TWO_WOMEN = """# ::id 2
# ::snt One woman is measuring another woman's ankle.
(xv0 / measure-01
      :ARG0 (xv2 / woman :quant 1)
      :ARG1 (xv1 / ankle :part-of (xv3 / woman :mod (xv4 / another))))"""
SWAPPED = "(xv0 / measure-01 :ARG0 (xv1 / ankle :part-of (xv3 / woman :mod (xv4 / another))) :ARG1 (xv2 / woman))"


def test_build_reifies_constants_and_normalises_labels():
    b = build('# ::snt Paris.\n(c / City :name (n / name :op1 "Paris") :polarity -)')
    assert b.labels == ("city", "name", "paris", "-")  # as Smatch compares them: lower-cased, no quotes
    assert set(b.edges) == {(0, ":name", 1), (1, ":op1", 2), (0, ":polarity", 3)}


def test_wlk_hand_computed():
    # shared: nodes {want-01, go-02}, triples {want-01 :ARG1 go-02}; no WL-iteration label is shared.
    # dot = 2 + 1; |v|^2 = (3 + 3) + 3/2^2 + 3/3^2 for both graphs.
    assert wlk(WANT_BOY, WANT_GIRL) == pytest.approx(3 / (6 + 3 / 4 + 3 / 9), abs=1e-12)
    assert wlk("(a / dog)", "(b / cat)") == 0.0
    assert wlk("(a / dog)", "(b / Dog)") == 1.0  # single node: only the node-label and iteration blocks
    assert wlk("(i / i)", "(j / i)") == 1.0  # a concept equal to its variable is no other concept
    assert wlk('(n / name :op1 "William")', "(n / name :op1 william)") == 1.0


def test_wlk_identity_symmetry_and_variable_renaming():
    for g in (WANT_BOY, TWO_WOMEN, SWAPPED):
        assert wlk(g, g) == pytest.approx(1.0, abs=1e-12)
    assert wlk(WANT_BOY, WANT_GIRL) == wlk(WANT_GIRL, WANT_BOY)
    renamed = WANT_BOY.replace("(b /", "(q /").replace(":ARG0 b)", ":ARG0 q)")
    assert wlk(WANT_BOY, renamed) == pytest.approx(1.0, abs=1e-12)
    assert 0.0 < wlk(TWO_WOMEN, SWAPPED) < 1.0


def test_wl_relabelling_keyed_by_label_order_free():
    # as the reference, nodes sharing a label share one WL label; here it joins both `woman` neighbourhoods
    # (the reference keeps the last node's), so the score does not depend on the order nodes are written in
    from amrsim.metrics.wlk import wlk_features

    f = wlk_features(TWO_WOMEN, k=1)
    shared = [lab for lab in f.blocks[2][1] if "woman" in lab.split(" ::: ")]
    assert shared == [":ARG0_measure-01 ::: :mod_another ::: :part_ankle ::: :quant_1 ::: woman"]
    reordered = (
        "(xv0 / measure-01 :ARG1 (xv1 / ankle :part-of (xv3 / woman :mod (xv4 / another)))"
        " :ARG0 (xv2 / woman :quant 1))"
    )
    assert wlk(TWO_WOMEN, reordered) == pytest.approx(1.0, abs=1e-12)


def test_wwlk_identity_and_order():
    vec = load_node_vectors("random", seed=0)
    assert wwlk(TWO_WOMEN, TWO_WOMEN, vec, stability_level=3) == pytest.approx(1.0, abs=1e-9)
    s = wwlk(WANT_BOY, WANT_GIRL, vec, stability_level=3)
    assert s < 1.0
    assert s == pytest.approx(wwlk(WANT_GIRL, WANT_BOY, vec, stability_level=3), abs=1e-9)


def test_wwlk_pair_score_independent_of_batch():
    vec = load_node_vectors("random", seed=3)
    alone = wwlk_batch([(TWO_WOMEN, SWAPPED)], vec, stability_level=2, seed=3)
    mixed = wwlk_batch([(WANT_BOY, WANT_GIRL), (TWO_WOMEN, SWAPPED)], vec, stability_level=2, seed=3)
    assert alone[0] == mixed[1]
    assert wwlk(TWO_WOMEN, SWAPPED, vec, stability_level=2, seed=4) != alone[0]


def test_batch_helpers_and_errors():
    pairs = [(WANT_BOY, WANT_GIRL), (TWO_WOMEN, SWAPPED)]
    assert wlk_batch(pairs) == [wlk(a, b) for a, b in pairs]
    with pytest.raises(ValueError, match="cannot read AMR"):
        wlk("(a / dog", "(b / dog)")
    out = wlk_batch([("(a / dog", "(b / dog)"), pairs[0]], on_error="nan")
    assert math.isnan(out[0]) and out[1] == wlk(*pairs[0])


_DETERMINISM = f"""
import sys; sys.path.insert(0, {str(ROOT)!r})
from amrsim.metrics.wlk import wlk, wwlk
from amrsim.metrics.vectors import load_node_vectors
gs = {[WANT_BOY, WANT_GIRL, TWO_WOMEN, SWAPPED]!r}
v = load_node_vectors("random", seed=1)
print([repr(wlk(a, b)) for a in gs for b in gs])
print([repr(wwlk(a, b, v, stability_level=2, seed=1)) for a in gs for b in gs])
"""


@pytest.mark.slow
def test_identical_across_hash_seeds():
    outs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", _DETERMINISM], env=env, capture_output=True, text=True, check=True)
        outs.add(r.stdout)
    assert len(outs) == 1


def test_label_words_and_vector_sources(tmp_path):
    assert label_words("want-01") == ["want"]
    assert label_words("-") == ["false", "not", "untrue"]
    assert label_words('"New_York"') == ["new", "york"]
    r1, r2 = load_node_vectors("random", seed=5), load_node_vectors("random", seed=5)
    assert r1.dim == 100 and np.array_equal(r1.vector("dog"), r2.vector("dog"))
    glove = tmp_path / "g.txt"
    glove.write_text("want 1 0 0\ngo 0 1 0\n3 0 0 2\n")
    f = load_node_vectors(f"file:{glove}")
    assert isinstance(f, FileVectors) and f.dim == 3
    assert np.array_equal(f.vector("want-01"), [1, 0, 0])
    assert f.vector("zebra") is None
    assert np.array_equal(f.vector("33"), [0, 0, 1.5])  # digit vectors, the i-th divided by 1+i, then the mean
    s = wwlk(WANT_BOY, WANT_GIRL, f, stability_level=1)
    assert s == wwlk(WANT_BOY, WANT_GIRL, f, stability_level=1)
    with pytest.raises(ValueError, match="unknown node vector source"):
        load_node_vectors("glove")


@pytest.mark.slow
def test_minilm_vectors():
    v = load_node_vectors("minilm")
    assert v.dim == 384
    a, b = v.vector("want-01"), v.vector("want")
    assert a.shape == (384,) and np.array_equal(a, b)
    assert v.vector("") is None
    assert 0.0 < wwlk(WANT_BOY, WANT_GIRL, v, stability_level=2) < 1.0


@pytest.mark.integration
def test_bamboo_sts_sample():
    from scipy.stats import pearsonr

    path = shared("amr_bamboo", "bamboo_sts_main_test.jsonl.gz")
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for _, line in zip(range(300), f, strict=False)]
    pairs = [(r["amr1"], r["amr2"]) for r in rows]
    gold = [r["gold_norm"] for r in rows]
    s = wlk_batch(pairs)
    assert all(0.0 <= x <= 1.0 + 1e-12 for x in s)
    assert pearsonr(s, gold)[0] > 0.55
    w = wwlk_batch(pairs[:100], load_node_vectors("random"), stability_level=3)
    assert pearsonr(w, gold[:100])[0] > 0.5


def _wide_graph(n: int, shift: int = 0) -> str:
    """An n-node graph, at most three levels deep: the root, then pairs (x :mod y) under it."""
    concepts = ["person", "want-01", "go-02", "city", "thing", "say-01", "big", "dog"]
    parts = [f"(n0 / {concepts[shift % 8]}"]
    for i in range(1, n, 2):
        child = f" :mod (n{i + 1} / {concepts[(i + 3) % 8]})" if i + 1 < n else ""
        parts.append(f" :ARG{i % 3} (n{i} / {concepts[(i + shift) % 8]}{child})")
    return "".join(parts) + ")"


def test_wwlk_work_budget_bounds_large_pairs_deterministically():
    from amrsim.metrics.wlk import (
        DEFAULT_WWLK_WORK_BUDGET,
        WorkBudgetExceeded,
        WWLKScore,
        wwlk_runs,
        wwlk_score,
        wwlk_work,
    )

    vec = load_node_vectors("random", seed=0)
    small = wwlk_score(WANT_BOY, WANT_GIRL, vec)
    assert small.runs == 16 and not small.bounded and small.value == wwlk(WANT_BOY, WANT_GIRL, vec)
    # the run count follows from the sizes alone: the most runs whose counted work fits
    runs = wwlk_runs(250, 250, 2, 15, vec.dim, True, DEFAULT_WWLK_WORK_BUDGET)
    assert 0 < runs < 16
    assert wwlk_work(250, 250, 2, runs, vec.dim, True) <= DEFAULT_WWLK_WORK_BUDGET
    assert wwlk_work(250, 250, 2, runs + 1, vec.dim, True) > DEFAULT_WWLK_WORK_BUDGET
    g1, g2 = _wide_graph(250), _wide_graph(250, 1)
    first, again = wwlk_score(g1, g2, vec), wwlk_score(g1, g2, vec)
    assert first == again and first.bounded and first.runs == runs and first.value is not None
    # a bounded pair averages the first runs of the full draw: equal to asking for that many runs outright
    assert first.value == pytest.approx(wwlk_score(g1, g2, vec, stability_level=runs - 1).value, abs=1e-12)
    for n in (500, 1000):  # not even one run fits: no score, said so, without doing the work
        big = wwlk_score(_wide_graph(n), _wide_graph(n, 1), vec)
        assert big == WWLKScore(None, 0, True)
        with pytest.raises(WorkBudgetExceeded, match="work budget"):
            wwlk(_wide_graph(n), _wide_graph(n, 1), vec)
    # a smaller budget bounds a pair the default leaves alone
    n1, n2 = len(build(TWO_WOMEN).labels), len(build(SWAPPED).labels)
    tight = wwlk_score(TWO_WOMEN, SWAPPED, vec, work_budget=wwlk_work(n1, n2, 2, 3, vec.dim, True))
    assert tight.bounded and tight.runs == 3


def test_engine_records_the_bound_per_pair():
    import polars as pl

    from amrsim.metrics.engine import MetricsOptions, score_pairs

    frame = pl.DataFrame({"amr1": [WANT_BOY, _wide_graph(500)], "amr2": [WANT_GIRL, _wide_graph(500, 1)]})
    rows = score_pairs(frame, MetricsOptions(aspects=("concepts", "wwlk"), vectors="random"))
    assert rows["status"].to_list() == ["ok", "ok"]
    assert rows["bounded"].to_list() == [None, "wwlk (no run fits)"]
    assert rows["wwlk"][0] is not None and rows["wwlk"][1] is None and rows["concepts"][1] is not None


def test_emd_cost_is_pots_emd2():
    """WWLK calls POT's network simplex without emd2's wrapper: the same cost as ot.emd2 on uniform weights of
    unequal sizes, ties and zero distances included."""
    from amrsim.metrics.wlk import emd_cost, load_pot

    ot = load_pot()
    rng = np.random.default_rng(3)
    for n1, n2 in ((1, 1), (1, 5), (3, 7), (12, 9), (40, 33)):
        for dist in (rng.uniform(0, 2, (n1, n2)), np.round(rng.uniform(0, 2, (n1, n2)), 1), np.zeros((n1, n2))):
            a, b = np.full(n1, 1.0 / n1), np.full(n2, 1.0 / n2)
            assert emd_cost(a, b, np.ascontiguousarray(dist)) == float(ot.emd2(a, b, dist))


def test_diag_quad_is_numpys_einsum_to_the_last_bit():
    """WWLK's squared norms in C repeat einsum's order of sums: every graph size it takes (3 to 90 nodes), shared or
    per-run Gram matrices, a bounded pair's fewer runs and more runs than the default; outside that range, and for
    arrays it does not take, `diag_quad` is einsum itself. Bad arguments are refused, naming the rule."""
    from amrsim.metrics import _wwlk_core
    from amrsim.metrics.wlk import DIAG_QUAD_NODES, diag_quad

    rng = np.random.default_rng(0)
    low, high = DIAG_QUAD_NODES
    for n in range(1, high + 3):
        for runs in ((1, 16) if n % 7 else (1, 2, 5, 16, 33)):
            for g_runs in sorted({1, runs}):
                a = rng.standard_normal((runs, n, n)) * rng.uniform(0.01, 10)
                g = rng.standard_normal((g_runs, n, n))
                expected = np.einsum("rij,rjk,rik->ri", a, g, a)
                assert np.array_equal(diag_quad(a, g), expected), (n, runs, g_runs)
                if low <= n <= high:
                    out = np.empty((runs, n))
                    _wwlk_core.diag_quad(a, g, out)
                    assert np.array_equal(out, expected), (n, runs, g_runs)
    a = rng.standard_normal((4, 6, 6))
    g = rng.standard_normal((4, 6, 6))
    strided = a.transpose(0, 2, 1)  # not C-contiguous: einsum's own path
    assert np.array_equal(diag_quad(strided, g), np.einsum("rij,rjk,rik->ri", strided, g, strided))
    with pytest.raises(ValueError, match="shapes must be"):
        _wwlk_core.diag_quad(a, g[:, :5, :5].copy(), np.empty((4, 6)))
    with pytest.raises(TypeError, match="float64"):
        _wwlk_core.diag_quad(a.astype(np.float32), g, np.empty((4, 6)))
    with pytest.raises(TypeError, match="3 arrays"):
        _wwlk_core.diag_quad(a, g)


def test_a_file_that_is_not_glove_text_is_one_error_naming_its_line(tmp_path):
    from amrsim.errors import InputError

    path = tmp_path / "passwd"
    path.write_text("the 0.1 0.2\nroot:x:0:0:root /root /bin/bash\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"passwd:2: not a vectors file") as caught:
        load_node_vectors(f"file:{path}")
    assert "root:x" not in str(caught.value)  # the file's content is not echoed
    with pytest.raises(InputError, match="node vectors file not found"):
        load_node_vectors(f"file:{tmp_path / 'missing.txt'}")
