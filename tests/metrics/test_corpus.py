"""Corpus Smatch (`amrsim metrics corpus`): micro-averaged counts on a hand-computed example, bootstrap interval."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

from amrsim.metrics.corpus import GoldGraphError, bootstrap_interval, corpus_smatch, pair_counts
from tests.helpers import ROOT

# Triples under smatch 1.0.4's convention (instances, TOP, relations):
#   pair 1: (a / boy) vs (b / boy): 2 and 2 triples, all matched -> 2
#   pair 2: want-01 :ARG0 boy vs want-01 :ARG0 girl: 4 and 4; w->w (instance + TOP) and ARG0 match, boy != girl -> 3
#   pair 3: an unreadable test graph against (d / dog): counts as empty: 0 matched, 0 test, 2 gold triples
TEST = ["(a / boy)", "(w / want-01 :ARG0 (b / boy))", "(x / "]
GOLD = ["(b / boy)", "(w / want-01 :ARG0 (g / girl))", "(d / dog)"]
MATCHED, N1, N2 = [2, 3, 0], [2, 4, 0], [2, 4, 2]


def test_counts_and_micro_average_by_hand():
    counts = pair_counts(TEST, GOLD)
    assert counts.matched.tolist() == MATCHED and counts.n1.tolist() == N1 and counts.n2.tolist() == N2
    assert counts.failed == (2,)
    result = corpus_smatch(TEST, GOLD, samples=0)
    assert result.precision == pytest.approx(5 / 6) and result.recall == pytest.approx(5 / 8)
    assert result.f1 == pytest.approx(2 * 5 / (6 + 8))  # 0.7143; the mean of per-pair F1s would be 0.5833
    assert (result.matched, result.n1, result.n2, result.failed, result.pairs) == (5, 6, 8, 1, 3)


def test_bootstrap_matches_the_exact_resampling_distribution():
    counts = pair_counts(TEST, GOLD)
    # all 27 equally likely resamples of three pairs, enumerated
    exact = []
    for rows in itertools.product(range(3), repeat=3):
        m, a, b = (sum(col[i] for i in rows) for col in (MATCHED, N1, N2))
        exact.append(2 * m / (a + b))
    low, high = bootstrap_interval(counts, samples=20_000, seed=3)
    # the exact distribution's quantiles (smallest value whose CDF reaches q); 0.0 is the 2.5% one: (3, 3, 3) has
    # probability 1/27 and F1 0
    assert low == pytest.approx(np.quantile(exact, 0.025, method="inverted_cdf"), abs=0.02)
    assert high == pytest.approx(np.quantile(exact, 0.975, method="inverted_cdf"), abs=0.02)
    assert (low, high) == bootstrap_interval(counts, samples=20_000, seed=3)  # seeded: the same interval
    uniform = pair_counts([TEST[0]] * 4, [GOLD[0]] * 4)  # every pair alike: every resample has the same F1
    assert bootstrap_interval(uniform, samples=50) == (1.0, 1.0)


def test_unreadable_gold_graph_names_its_pair():
    with pytest.raises(GoldGraphError) as e:
        pair_counts(["(a / boy)", "(b / boy)"], ["(a / boy)", "(b / "])
    assert e.value.index == 1


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "amrsim.cli", "metrics", "corpus", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


@pytest.mark.slow
def test_corpus_command(tmp_path):
    path = tmp_path / "parsed.jsonl"
    path.write_text("".join(json.dumps({"pred": t, "gold": g}) + "\n" for t, g in zip(TEST, GOLD, strict=True)))
    done = _cli("--file", str(path), "--test-col", "pred", "--gold-col", "gold", "--samples", "200", "--seed", "1")
    assert done.returncode == 0, done.stderr
    assert "P 0.8333  R 0.6250  F1 0.7143" in done.stdout
    assert "95% bootstrap interval [" in done.stdout and "1 test graphs unreadable" in done.stdout
    assert done.stdout == _cli("--file", str(path), "--test-col", "pred", "--gold-col", "gold", "--samples", "200",
                               "--seed", "1").stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"amr1": "(a / boy)", "amr2": "(a / boy)"}) + "\n"
                   + json.dumps({"amr1": "(a / boy)", "amr2": "(a / "}) + "\n")
    failed = _cli("--file", str(bad))
    assert failed.returncode == 2
    assert f"{bad}:2: gold graph (amr2) cannot be read" in failed.stderr and "Traceback" not in failed.stderr


@pytest.mark.slow
def test_corpus_aspects_command(tmp_path):
    """`--aspects`: amr-evaluation's table from counts summed over pairs; `--json` gives the same counts; an unknown
    aspect is one line listing the known ones (exit 2)."""
    path = tmp_path / "parsed.jsonl"
    path.write_text("".join(json.dumps({"amr1": t, "amr2": g}) + "\n" for t, g in zip(TEST, GOLD, strict=True)))
    done = _cli("--file", str(path), "--aspects", "smatch,concepts,negation", "--json")
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)
    assert table["pairs"] == 3 and table["failed"] == 1
    # Smatch: the counts corpus_smatch sums; concepts (sets): {boy}/{boy}, {want-01, boy}/{want-01, girl}, -/{dog}
    assert [table["aspects"]["smatch"][k] for k in ("matched", "test", "gold")] == [sum(MATCHED), sum(N1), sum(N2)]
    assert [table["aspects"]["concepts"][k] for k in ("matched", "test", "gold")] == [2, 3, 4]
    assert table["aspects"]["negation"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "matched": 0, "test": 0,
                                            "gold": 0}
    printed = _cli("--file", str(path), "--aspects", "concepts")
    assert printed.returncode == 0 and "concepts" in printed.stdout and "0.6667" in printed.stdout
    unknown = _cli("--file", str(path), "--aspects", "concepts,wlk")
    assert unknown.returncode == 2 and "'wlk'" in unknown.stderr and "reentrancies" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
