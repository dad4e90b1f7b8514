"""Differential data on real corpora: four reference implementations against amrsim, pair by pair.

The data file, tests/conformance/data/real_corpora.json.gz, holds what the references (peers) output on ~2,000 AMR
pairs of real corpora, with ids that locate each pair's graphs in ../shared/data (the `ud` parses, amrsim's own
output, are stored in the file). Sources (`pair_ids` below):

  lp-ud/<id>        Little Prince: amrsim's rule-based `ud` parse of sentence <id> (amr1, stored) vs its gold AMR
  lp-next/<id>      Little Prince: gold AMR <id> (amr1) vs the gold AMR of the next sentence
  bamboo/<task>_main_<split>/<row>   BAMBOO main <task> <split> file, 0-based row: amr1 vs amr2

amr1 is the test graph (smatch's first file, amr-evaluation's parsed file), amr2 the gold graph. Comment lines
(``#``) are dropped from every graph before any program sees it.

Peers (see SOURCES.md and the data file's `reference` header for versions, commits, commands):
  smatch_104   smatch 1.0.4 (PyPI): get_amr_match counts, best of 20 calls
  smatchpp     smatchpp 1.8.0 (PyPI): exact ILP with AMRStandardizer, counts
  wlk          flipz357/weisfeiler-leman-amr-metrics main_wlk.py -k 2 -round_decimals 15 (symbolic WLK)
  wlk_conv     the same program with amrsim's documented WLK conventions applied (not the reference; informative)
  amr_eval     mdtux89/amr-evaluation evaluation.sh: Unlabeled / No WSD (smatch 1.0.4 on the rewritten graphs) and
               scores.py's Concepts, Named Ent., Negations, Wikification, Reentrancies, SRL counts; its Smatch line is
               smatch_104 on the same files

Usage (amrsim's venv):
    python benchmarks/conformance_real.py compare [--source lp-ud|lp-next|bamboo] [--examples 5]
    python benchmarks/conformance_real.py generate --peers /work/peers [--jobs 2] [--work DIR]

`generate` needs the peers' environment, PEERS/venv (python 3.11: penman 1.3.1, smatch 1.0.4, smatchpp 1.8.0 with
mip, networkx, numpy, scipy) and the reference code under PEERS/ref (amr_evaluation/, wlk/src/); it runs this same
file with the peers' python (`_peer` subcommand), which imports nothing of amrsim. `compare` needs only amrsim.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
DATA_FILE = ROOT / "tests" / "conformance" / "data" / "real_corpora.json.gz"
LP_FILE = "amr_little_prince/little_prince_v3.0.jsonl"
BAMBOO_TASKS = ("sts", "sick", "para")
BAMBOO_SPLITS = ("dev", "train")
SAMPLE_SEED = 20240611  # which pairs
SMATCH_SEED = 0  # hill-climbing: one random.Random(SMATCH_SEED) per pair and search (the peers' random.seed() no-op)
RESTARTS = 20  # best of 20 calls, as tests/conformance/test_smatch_104.py
N_LP_UD, N_LP_NEXT, N_BAMBOO_PER_TASK = 600, 600, 300
TOL = 1e-6
SET_ASPECTS = ("Concepts", "Named Ent.", "Negations", "Wikification")
SMATCH_ASPECTS = ("Smatch", "Unlabeled", "No WSD", "Reentrancies", "SRL")
AE_LINES = SMATCH_ASPECTS + SET_ASPECTS  # evaluation.sh prints Smatch/Unlabeled/No WSD, then scores.py's lines
AE_TO_AMRSIM = {"Smatch": "smatch_f1", "Unlabeled": "unlabeled", "No WSD": "no_wsd", "Reentrancies": "reentrancies",
                "SRL": "srl", "Concepts": "concepts", "Named Ent.": "named_entities", "Negations": "negation",
                "Wikification": "wikification"}


def strip_comments(text: str) -> str:
    return "\n".join(line for line in text.strip().split("\n") if not line.lstrip().startswith("#")).strip()


def _inputs(shared: Path = SHARED):
    """The shared-data reader the standing test uses (tests/conformance/_data.py), for the amrsim side only: the
    peers' python never imports it."""
    sys.path.insert(0, str(ROOT))
    from tests.conformance._data import RealInputs

    return RealInputs(shared)


def source_of(pair_id: str) -> str:
    return pair_id.split("/", 1)[0]


def select_pairs(inputs) -> list[str]:
    """The pair ids, sampled with SAMPLE_SEED (ud pairs are selected before parsing)."""
    rng = random.Random(SAMPLE_SEED)
    lp = inputs.lp()
    ids = [f"lp-ud/{lp[n]['id']}" for n in sorted(rng.sample(range(len(lp)), N_LP_UD))]
    ids += [f"lp-next/{lp[n]['id']}" for n in sorted(rng.sample(range(len(lp) - 1), N_LP_NEXT))]
    for task in BAMBOO_TASKS:
        pool = [(f"{task}_main_{split}", row) for split in BAMBOO_SPLITS
                for row in range(len(inputs.bamboo(f"{task}_main_{split}")))]
        ids += [f"bamboo/{name}/{row}" for name, row in sorted(rng.sample(pool, N_BAMBOO_PER_TASK))]
    return ids


# --------------------------------------------------------------------------------- peer side (peers' python) ---


class _NoReseed(random.Random):
    """A seeded generator whose `seed()` without argument (smatch's per-search re-seeding from os.urandom) does
    nothing, so a pair's searches are reproducible."""

    def seed(self, a=None, version=2):  # noqa: D102
        if a is not None:
            super().seed(a, version)


def _rewrite_unlabeled(text: str) -> str:  # evaluation.sh: sed 's/:[a-zA-Z0-9-]*/:label/g'
    return re.sub(r":[a-zA-Z0-9-]*", ":label", text)


def _rewrite_no_wsd(text: str) -> str:  # evaluation.sh: perl 's/(\/ [a-zA-Z0-9\-][a-zA-Z0-9\-]*)-[0-9][0-9]*/\1-01/g'
    return re.sub(r"(/ [a-zA-Z0-9\-][a-zA-Z0-9\-]*)-[0-9][0-9]*", r"\1-01", text)


def _scores_py_text(text: str) -> str:
    """evaluation.sh before scores.py: '#' lines dropped, tabs to spaces, runs of spaces squeezed (tr -s ' ');
    scores.py then joins the lines without a separator."""
    text = "\n".join(line for line in text.split("\n") if not line.startswith("#"))
    return re.sub(" +", " ", text.replace("\t", " ")).strip()


def _ilp_optimum(weight_dict: dict) -> tuple[int, bool]:
    """The exact maximum of smatch's own objective: over one-to-one node mappings restricted to the candidate pairs
    of `compute_pool`, the weights of the mapped pairs (instance/attribute matches, key -1) plus, for each two mapped
    pairs, their relation weight (stored in both directions, counted once), solved with mip (CBC). (optimum,
    proven optimal)."""
    import mip

    model = mip.Model(sense=mip.MAXIMIZE, solver_name=mip.CBC)
    model.verbose = 0
    x = {p: model.add_var(var_type=mip.BINARY) for p in weight_dict}
    rows, cols = defaultdict(list), defaultdict(list)
    for (i, j), v in x.items():
        rows[i].append(v)
        cols[j].append(v)
    for vs in [*rows.values(), *cols.values()]:
        if len(vs) > 1:
            model += mip.xsum(vs) <= 1
    obj = [w[-1] * x[p] for p, w in weight_dict.items() if w.get(-1)]
    for p1, d in weight_dict.items():
        for p2, w in d.items():
            if p2 == -1 or p2 <= p1:
                continue
            y = model.add_var(ub=1)
            model += y <= x[p1]
            model += y <= x[p2]
            obj.append(w * y)
    if not obj:
        return 0, True
    model.objective = mip.xsum(obj)
    status = model.optimize(max_seconds=120)
    return round(model.objective_value), status == mip.OptimizationStatus.OPTIMAL


def _search(module, t1: tuple, t2: tuple) -> tuple[list[int], int, bool]:
    """A smatch program's search on renamed triples (instance, attribute, relation; prefixes a / b): [best of
    RESTARTS get_best_match calls, test, gold], and the exact optimum of the same objective (_ilp_optimum)."""
    module.random = _NoReseed(SMATCH_SEED)
    best = 0
    for _ in range(RESTARTS):
        module.match_triple_dict.clear()
        _, m = module.get_best_match(*t1, *t2, "a", "b")
        module.match_triple_dict.clear()
        best = max(best, m)
    _, weights = module.compute_pool(*t1, *t2, "a", "b")
    # a bound first: each relation weight is stored at both of its node pairs, so half of it at each
    per_node: dict[int, float] = defaultdict(float)
    for (i, _j), w in weights.items():
        per_node[i] = max(per_node[i], w.get(-1, 0) + 0.5 * sum(v for k, v in w.items() if k != -1))
    if int(sum(per_node.values()) + 1e-9) <= best:
        opt, proven = best, True
    else:
        opt, proven = _ilp_optimum(weights)
    if opt < best and proven:
        raise AssertionError(f"ILP optimum {opt} below the hill-climbing's {best}")
    return [best, sum(map(len, t1)), sum(map(len, t2))], opt, proven


def _note_search(rec: dict, key: str, result: tuple[list[int], int, bool]) -> None:
    counts, opt, proven = result
    if key.startswith("amr_eval/"):
        rec.setdefault("amr_eval", {})[key.split("/", 1)[1]] = counts
    else:
        rec[key] = counts
    if opt > counts[0]:
        rec.setdefault("optimum", {})[key] = opt
    if not proven:
        rec.setdefault("unproven", []).append(key)


def _peer_pypi(pairs: list[dict]) -> list[dict]:
    """smatch 1.0.4 (also evaluation.sh's Smatch / Unlabeled / No WSD lines) and smatchpp 1.8.0's exact ILP."""
    import logging

    import amr  # smatch 1.0.4's
    import smatch
    from smatchpp import Smatchpp, solvers
    from smatchpp.formalism.amr import tools as amrtools

    logging.getLogger("smatchpp").setLevel(logging.ERROR)
    spp = Smatchpp(alignmentsolver=solvers.ILP(), graph_standardizer=amrtools.AMRStandardizer())

    def smatch_104(a: str, b: str):
        """What get_amr_match does (one-line texts as smatch.py reads them, parse, rename, triples), searched by
        _search."""
        graphs = [amr.AMR.parse_AMR_line(amr.AMR.get_amr_line(io.StringIO(t))) for t in (a, b)]
        if None in graphs:
            raise ValueError("amr.AMR.parse_AMR_line returned None")
        graphs[0].rename_node("a")
        graphs[1].rename_node("b")
        return _search(smatch, graphs[0].get_triples(), graphs[1].get_triples())

    out = []
    for p in pairs:
        a, b = p["amr1"], p["amr2"]
        rec: dict = {"id": p["id"]}
        try:
            r104 = smatch_104(a, b)
            _note_search(rec, "smatch_104", r104)
        except Exception as e:  # noqa: BLE001
            out.append({"id": p["id"], "error": ["smatch_104", f"{type(e).__name__}: {e}"[:200]]})
            continue
        try:
            _note_search(rec, "amr_eval/Unlabeled", smatch_104(_rewrite_unlabeled(a), _rewrite_unlabeled(b)))
            wa, wb = _rewrite_no_wsd(a), _rewrite_no_wsd(b)
            _note_search(rec, "amr_eval/No WSD", r104 if (wa, wb) == (a, b) else smatch_104(wa, wb))
        except Exception as e:  # noqa: BLE001
            out.append({"id": p["id"], "error": ["amr_eval", f"evaluation.sh smatch lines: {type(e).__name__}: "
                                                             f"{e}"[:200]]})
            continue
        try:
            match, status, _ = spp.process_pair(a, b)
            m = [float(x) for x in match["main"]]
            if m[0] != m[1] or any(x != int(x) for x in m):
                raise ValueError(f"unexpected smatchpp match vector {m}")
            rec["smatchpp"] = [int(m[0]), int(m[2]), int(m[3])]
            if float(status[0]) != float(status[1]):
                rec["smatchpp_bound"] = [float(status[0]), float(status[1])]
        except Exception as e:  # noqa: BLE001
            rec = {"id": p["id"], "error": ["smatchpp", f"{type(e).__name__}: {e}"[:200]]}
        out.append(rec)
    return out


def _peer_amr_eval(pairs: list[dict], ref: Path) -> list[dict]:
    """scores.py's per-pair counts: the body of its loop for one pair, and smatch_fromlists.run's per-pair search
    (best of RESTARTS get_best_match calls) for Reentrancies and SRL."""
    sys.path.insert(0, str(ref))
    os.chdir(ref)
    import smatch.amr as amr  # amr-evaluation's package (the path above shadows PyPI smatch)
    import smatch.smatch_fromlists as fromlists
    import utils as u

    def triples(g):
        out = []
        for t in g.get_triples()[1] + g.get_triples()[2]:
            out.append((t[0][:-3], t[2], t[1]) if t[0].endswith("-of") else (t[0], t[1], t[2]))
        return out

    def setc(lp, lg):
        lp, lg = u.disambig(lp), u.disambig(lg)
        return [len(set(lp) & set(lg)), len(set(lp)), len(set(lg))]

    def sub(sp, sg):  # smatch_fromlists.run's steps for one pair
        a1, a2 = fromlists.parse_relations(*sp), fromlists.parse_relations(*sg)
        a1.rename_node("a")
        a2.rename_node("b")
        return _search(fromlists, a1.get_triples(), a2.get_triples())

    out = []
    for p in pairs:
        rec: dict = {"id": p["id"]}
        try:
            gp = amr.AMR.parse_AMR_line(_scores_py_text(p["amr1"]).replace("\n", ""))
            gg = amr.AMR.parse_AMR_line(_scores_py_text(p["amr2"]).replace("\n", ""))
            if gp is None or gg is None:
                raise ValueError("parse_AMR_line returned None")
            dp, dg = u.var2concept(gp), u.var2concept(gg)
            tp, tg = triples(gp), triples(gg)
            rec["Concepts"] = setc(u.concepts(dp), u.concepts(dg))
            rec["Named Ent."] = setc(u.namedent(dp, tp), u.namedent(dg, tg))
            rec["Negations"] = setc(u.negations(dp, tp), u.negations(dg, tg))
            rec["Wikification"] = setc(u.wikification(tp), u.wikification(tg))
            ae = {"Concepts": rec.pop("Concepts"), "Named Ent.": rec.pop("Named Ent."),
                  "Negations": rec.pop("Negations"), "Wikification": rec.pop("Wikification")}
            rec["amr_eval"] = ae
            _note_search(rec, "amr_eval/Reentrancies", sub(u.reentrancies(dp, tp), u.reentrancies(dg, tg)))
            _note_search(rec, "amr_eval/SRL", sub(u.srl(dp, tp), u.srl(dg, tg)))
        except Exception as e:  # noqa: BLE001
            rec = {"id": p["id"], "error": ["amr_eval", f"scores.py: {type(e).__name__}: {e}"[:200]]}
        out.append(rec)
    return out


def _wlk_conv(pairs: list[dict], src: Path) -> list[dict]:
    """The WLK program with amrsim's documented conventions (docs/metrics.md; wlk_reference.json's variant):
    concepts lower-cased before the graph is built, no '-' appended to a concept equal to its variable, every node
    label lower-cased without a string's quotes after the edges are added, and WL relabelling of a label from the
    union of the neighbourhoods of all nodes that carry it."""
    sys.path.insert(0, str(src))
    import amr_similarity
    import graph_helpers as gh
    import numpy as np

    class WLKConv(amr_similarity.WLK):
        def wl_gather_nodes(self, G):
            dic = {}
            for node in G.nodes:
                label = G.nodes[node]["label"]
                dic.setdefault(label, [label]).extend(self.wl_gather_node(node, G)[1:])
            return dic

    def graph(text):
        triples = [(s, r, ("" if t is None else t.lower()) if r == ":instance" else t)
                   for s, r, t in gh.stringamr2graph(text).triples]
        g, _ = gh.amrtriples2nxmedigraph(triples)
        for n in g.nodes:
            lab = g.nodes[n]["label"]
            if len(lab) >= 2 and lab[0] == '"' and lab[-1] == '"':
                lab = lab[1:-1]
            g.nodes[n]["label"] = lab.lower()
        return g

    out = []
    for p in pairs:
        try:
            v = WLKConv(iters=2).predict([graph(p["amr1"])], [graph(p["amr2"])])[0]
            out.append({"id": p["id"], "wlk_conv": float(np.around(v, 15))})
        except Exception as e:  # noqa: BLE001
            out.append({"id": p["id"], "error": ["wlk_conv", f"{type(e).__name__}: {e}"[:200]]})
    return out


def _peer_main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="conformance_real.py _peer")
    ap.add_argument("which", choices=("pypi", "amr_eval", "wlk_check", "wlk_conv"))
    ap.add_argument("--peers", type=Path, required=True)
    ap.add_argument("--inp", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    pairs = [json.loads(line) for line in a.inp.read_text(encoding="utf-8").splitlines()]
    if a.which == "pypi":
        res = _peer_pypi(pairs)
    elif a.which == "amr_eval":
        res = _peer_amr_eval(pairs, (a.peers / "ref" / "amr_evaluation").resolve())
    elif a.which == "wlk_conv":
        res = _wlk_conv(pairs, (a.peers / "ref" / "wlk" / "src").resolve())
    else:  # every graph readable by the WLK program's GraphParser (a whole-file run stops at the first bad one)
        sys.path.insert(0, str((a.peers / "ref" / "wlk" / "src").resolve()))
        import graph_helpers as gh

        res = []
        for p in pairs:
            try:
                gh.GraphParser().parse([p["amr1"], p["amr2"]])
                res.append({"id": p["id"]})
            except Exception as e:  # noqa: BLE001
                res.append({"id": p["id"], "error": ["wlk", f"GraphParser: {type(e).__name__}: {e}"[:200]]})
    a.out.write_text("".join(json.dumps(r) + "\n" for r in res), encoding="utf-8")


# ------------------------------------------------------------------------------------ generate (amrsim's venv) ---


def _ud_parses(inputs, ids: list[str]) -> dict[str, tuple[str | None, str | None]]:
    from amrsim.amr.ud import UDParser

    rows = {r["id"]: r for r in inputs.lp()}
    want = [i.split("/", 1)[1] for i in ids if source_of(i) == "lp-ud"]
    results = UDParser("en").parse([rows[w]["snt"] for w in want])
    return {f"lp-ud/{w}": (r.penman, r.error) for w, r in zip(want, results, strict=True)}


def _run_workers(jobs: list[tuple[str, list[dict]]], peers: Path, work: Path, parallel: int) -> dict[str, list[dict]]:
    """Run `_peer` workers (the peers' python) on chunks; returns their outputs by worker kind."""
    py = str(peers / "venv" / "bin" / "python")
    pending, running, results = list(jobs), [], defaultdict(list)
    n = 0
    while pending or running:
        while pending and len(running) < parallel:
            kind, chunk = pending.pop(0)
            inp, out = work / f"in_{n}.jsonl", work / f"out_{n}.jsonl"
            n += 1
            inp.write_text("".join(json.dumps(p) + "\n" for p in chunk), encoding="utf-8")
            proc = subprocess.Popen([py, str(Path(__file__).resolve()), "_peer", kind, "--peers", str(peers),
                                     "--inp", str(inp), "--out", str(out)], cwd=str(work))
            running.append((kind, proc, out, time.perf_counter()))
        time.sleep(0.5)
        for item in list(running):
            kind, proc, out, t0 = item
            if proc.poll() is None:
                continue
            running.remove(item)
            if proc.returncode != 0:
                raise SystemExit(f"peer worker {kind} failed ({proc.returncode})")
            results[kind] += [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
            print(f"  {kind}: {len(results[kind])} pairs done ({time.perf_counter() - t0:.0f} s for the chunk)",
                  flush=True)
    return results


def _wlk_reference(pairs: list[dict], peers: Path, work: Path) -> dict[str, float]:
    """main_wlk.py -a A -b B -k 2 -round_decimals 15 on one file pair per source (values per pair are independent
    of the other pairs in the files; checked on one-pair files for the first 3 pairs of each source)."""
    py = str(peers / "venv" / "bin" / "python")
    src = (peers / "ref" / "wlk" / "src").resolve()

    def run(group: list[dict], tag: str) -> list[float]:
        fa, fb = work / f"wlk_{tag}_a.txt", work / f"wlk_{tag}_b.txt"
        fa.write_text("\n\n".join(p["amr1"] for p in group) + "\n", encoding="utf-8")
        fb.write_text("\n\n".join(p["amr2"] for p in group) + "\n", encoding="utf-8")
        res = subprocess.run([py, "main_wlk.py", "-a", str(fa), "-b", str(fb), "-k", "2", "-round_decimals", "15"],
                             cwd=src, capture_output=True, text=True, check=True)
        values = [float(x) for x in res.stdout.split()]
        if len(values) != len(group):
            raise SystemExit(f"main_wlk.py printed {len(values)} scores for {len(group)} pairs ({tag})")
        return values

    out: dict[str, float] = {}
    by_source: dict[str, list[dict]] = defaultdict(list)
    for p in pairs:
        by_source[source_of(p["id"])].append(p)
    for source, group in by_source.items():
        values = run(group, source)
        out.update({p["id"]: v for p, v in zip(group, values, strict=True)})
        for k, p in enumerate(group[:3]):
            if run([p], f"{source}_single{k}") != [out[p["id"]]]:
                raise SystemExit(f"{p['id']}: main_wlk.py on a one-pair file differs from the whole-file run")
    return out


def _f(m: int, t: int, g: int) -> tuple[float, float, float]:
    """(P, R, F) as amr-evaluation computes them from counts (0 where a side is empty)."""
    p = m / t if t else 0.0
    r = m / g if g else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def _corpus(records: list[dict], scores_stdout: list[str] | None) -> dict:
    sums: dict[str, list[int]] = {}
    for rec in records:
        for key, counts in [("smatch_104", rec["smatch_104"]), ("smatchpp", rec["smatchpp"])] + [
                (f"amr_eval/{k}", v) for k, v in rec["amr_eval"].items()]:
            s = sums.setdefault(key, [0, 0, 0])
            for i in range(3):
                s[i] += counts[i]
    sums["amr_eval/Smatch"] = sums["smatch_104"]
    lines = []
    for name in AE_LINES:
        p, r, f = _f(*sums[f"amr_eval/{name}"])
        if name in ("Smatch", "Unlabeled", "No WSD"):
            lines.append(f"{name} -> P: {p:.3f}, R: {r:.3f}, F: {f:.3f}")
        elif name in ("Reentrancies", "SRL"):  # smatch_fromlists returns '%.3f' strings, scores.py prints .2f
            p, r, f = (float(f"{x:.3f}") for x in (p, r, f))
            lines.append(f"{name} -> P: {p:.2f} , R: {r:.2f} , F: {f:.2f}")
        else:
            lines.append(f"{name} -> P: {p:.2f} , R: {r:.2f} , F: {f:.2f}" if p + r else
                         f"{name} -> P: {p:.2f} , R: {r:.2f} , F: 0.00")
    out = {"pairs": len(records), "micro_counts": {
        "smatch_104": sums["smatch_104"], "smatchpp": sums["smatchpp"],
        "amr_eval": {name: sums[f"amr_eval/{name}"] for name in AE_LINES}}, "amr_eval_lines": lines,
        "wlk_mean": sum(r["wlk"] for r in records) / len(records)}
    if scores_stdout is not None:
        out["scores_py_stdout_whole_source"] = scores_stdout
    return out


def _scores_py_whole(records: list[dict], peers: Path, work: Path, tag: str) -> list[str]:
    """The unmodified scores.py on the source's pairs as two files (one hill-climbing run per subgraph pair, so
    Reentrancies/SRL may print a little below the best-of-20 micro counts)."""
    ref = (peers / "ref" / "amr_evaluation").resolve()
    fa, fb = work / f"scores_{tag}_1.tmp", work / f"scores_{tag}_2.tmp"
    fa.write_text("\n\n".join(_scores_py_text(r["amr1"]) for r in records) + "\n", encoding="utf-8")
    fb.write_text("\n\n".join(_scores_py_text(r["amr2"]) for r in records) + "\n", encoding="utf-8")
    res = subprocess.run([str(peers / "venv" / "bin" / "python"), "scores.py", str(fa), str(fb)], cwd=ref,
                         capture_output=True, text=True, check=True)
    return res.stdout.strip().splitlines()


def _reference_header(peers: Path) -> dict:
    freeze = subprocess.run([str(peers / "venv" / "bin" / "python"), "-m", "pip", "freeze"], capture_output=True,
                            text=True).stdout.split()
    pyver = subprocess.run([str(peers / "venv" / "bin" / "python"), "--version"], capture_output=True,
                           text=True).stdout.strip()
    return {
        "name": "real corpora: smatch 1.0.4, smatchpp 1.8.0 (ILP), WLK reference, amr-evaluation, pair by pair",
        "generated_by": "python benchmarks/conformance_real.py generate --peers PEERS (this file's reference and "
                        "pairs); the peers ran in a separate virtual environment outside the repository",
        "environment": {"python": pyver, "packages": freeze},
        "inputs": {
            "lp-ud/<id>": f"amr1 = amrsim's `ud` parse (UDParser('en').parse of the sentence `snt` of <id> in "
                          f"../shared/data/{LP_FILE}; stored in the pair as amr1, since it is amrsim's output), "
                          "amr2 = that row's gold `amr`",
            "lp-next/<id>": f"amr1 = gold `amr` of <id>, amr2 = gold `amr` of the next row of {LP_FILE}",
            "bamboo/<task>_main_<split>/<row>": "../shared/data/amr_bamboo/bamboo_<task>_main_<split>.jsonl.gz, "
                                                "0-based line <row>: amr1, amr2",
            "comments": "lines starting with '#' dropped from every graph (RealInputs.pair, strip_comments) before "
                        "any "
                        "program reads it; amr1 is the test graph (smatch's first file, evaluation.sh's $1)",
            "sampling": f"random.Random({SAMPLE_SEED}): {N_LP_UD} Little Prince rows for lp-ud, {N_LP_NEXT} for "
                        f"lp-next, {N_BAMBOO_PER_TASK} rows per BAMBOO task from main dev+train (select_pairs)",
        },
        "peers": {
            "smatch_104": "smatch==1.0.4 (PyPI, snowblink14/smatch): [matched, test, gold] = best of "
                          f"{RESTARTS} runs of what smatch.get_amr_match(one_line(amr1), one_line(amr2)) does "
                          "(amr.AMR.parse_AMR_line, rename_node a/b, get_triples, then get_best_match with "
                          "iteration_num 5 = the CLI's -r 4; match_triple_dict cleared around each run; one_line = "
                          "amr.AMR.get_amr_line). A graph that repeats a triple has each copy matched (matched can "
                          "exceed the test count). Random: smatch.random = random.Random("
                          f"{SMATCH_SEED}) per pair with its argument-less seed() (smatch re-seeds from os.urandom "
                          "before every search) made a no-op, so a rerun gives the same counts. Hill-climbing: "
                          "the counts are a lower bound of the optimum.",
            "smatchpp": "smatchpp==1.8.0 (PyPI, flipz357/smatchpp), mip 2.0.0 (CBC): Smatchpp(alignmentsolver="
                        "solvers.ILP(), graph_standardizer=formalism.amr.tools.AMRStandardizer()).process_pair(amr1, "
                        "amr2): [match[0], match[2], match[3]] = [matched, test, gold] (match[1] == match[0] checked); "
                        "F1 = 2 * matched / (test + gold) (smatchpp prints it x100, 2 decimals); "
                        "`smatchpp_bound` present only where the ILP status's bounds differ (not proven optimal)",
            "wlk": "flipz357/weisfeiler-leman-amr-metrics, assembled as tests/conformance/SOURCES.md says: "
                   "src/graph_helpers.py @cfbe8ce5ca703e68eec9af3bf9424360d585dcfb, src/amr_similarity.py "
                   "@b351fbd99ae394b79753d4d6b420613308db69e5 (class WLK and its interface only; the WWLK classes "
                   "need pyemd/gensim and were left out with their imports), the GraphParser-era src/main_wlk.py, "
                   "src/data_helpers.py @5b3982cf2d32ebbd69fe859eda4e356e1e5ab9a4 + read_graph_file = "
                   "read_amr_file, log_helper.py a two-line logger. Command: cd src && python main_wlk.py -a A.txt "
                   "-b B.txt -k 2 -round_decimals 15, one file pair per source (blank-line separated graphs; each "
                   "pair's value is independent of the others, re-checked on one-pair files for 3 pairs a source)",
            "wlk_conv": "NOT a reference: the same WLK code with amrsim's documented conventions (docs/metrics.md; "
                        "wlk_reference.json's variant_labels_as_smatch): concepts lower-cased before the graph is "
                        "built, maybe_fix_if_concept_node_same_as_var_node not called, after add_edges every node "
                        "label lower-cased with a string's surrounding quotes removed, and wl_gather_nodes extends "
                        "a label's list with each node's neighbourhood (dic.setdefault(label, [label]).extend(...)) "
                        "instead of keeping the last node's; in-process (_wlk_conv), rounded to 15 decimals. A "
                        "difference from `wlk` that `wlk_conv` does not have is a documented convention",
            "amr_eval": {
                "repo": "mdtux89/amr-evaluation",
                "files": {
                    "scores.py": "8bc6b2e9e4170412f91c33281410163441f97cba (python 3), unmodified",
                    "utils.py": "55939bd497009f06ecb2ee9e0eed2367f2f5f5ff, unmodified",
                    "smatch/smatch_fromlists.py": "d16ebf2724402199a19063b13f3a17a026549dc9 with dead code removed "
                                                  "(verbose branches, argparse builders, unused helpers)",
                    "evaluation.sh": "55939bd497009f06ecb2ee9e0eed2367f2f5f5ff (its rewrites, replicated in "
                                     "Python: _rewrite_unlabeled, _rewrite_no_wsd, _scores_py_text)",
                    "smatch/amr.py": "the repository stores it only as .pyc; stand-in = flipz357/amr-metric-suite "
                                     "py3-Smatch-and-S2match/smatch/amr.py @a0c4dd6f4f6e262943f1eec5e869f16f14a536e1 "
                                     "(+ its smatch/helpers.py), unmodified",
                },
                "amr_py_choice": "smatch_fromlists.parse_relations builds AMR(nodes, values, relation_dicts, "
                                 "attribute_dicts) with one dict {target variable: role} per node and calls "
                                 "rename_node/get_triples on it: only the smatch-2.0-era amr.py (relations as "
                                 "{node: role} dicts) fits that constructor. That amr.py does not turn `:mod` into "
                                 "a reversed `domain` (smatch 1.0.4's does, which made the earlier stand-in differ "
                                 "on Reentrancies); duplicate roles collapse as in the original (one role per "
                                 "(source, target) pair, one value per attribute name and node). flipz357's py3 "
                                 "copy is that amr.py with print -> a logger. mdtux89's top-level amr.py / "
                                 "smatch/amr_edited.py are the later (reent, allrelations) variant, whose "
                                 "constructor parse_relations cannot call.",
                "command": "per pair, what `./evaluation.sh amr1_file amr2_file` computes: Smatch = smatch_104; "
                           "Unlabeled / No WSD = smatch 1.0.4 (as smatch_104, best of 20) on the sed / perl "
                           "rewritten graphs; then scores.py's loop body for the pair on the '#'-stripped, "
                           "space-squeezed graphs (_peer_amr_eval): set aspects [|intersection|, |pred|, |gold|] "
                           "of the disambiguated value lists; Reentrancies / SRL [matched, test, gold] from "
                           "smatch_fromlists' per-pair steps (parse_relations, rename_node, get_triples, "
                           f"get_best_match) best of {RESTARTS}, random as for smatch_104",
                "f1_rule": "the reference's F from counts: P = m/test (0 if test = 0), R = m/gold (0 if gold = 0), "
                           "F = 2PR/(P+R) (0 if P+R = 0); Reentrancies/SRL: 0 where a side has no triples. "
                           "amrsim scores 1.0 where neither graph has the structure (vacuous agreement)",
            },
        },
        "per_pair": "pairs[]: id; amr1 (lp-ud only); smatch_104, smatchpp: [matched, test, gold]; wlk, wlk_conv: "
                    "floats; amr_eval: {line: [matched, test, gold]} for Unlabeled, No WSD, Concepts, Named Ent., "
                    "Negations, Wikification, Reentrancies, SRL (Smatch = smatch_104); optimum (only where it "
                    "exceeds the best of the hill-climbing runs): {search: matched} for smatch_104 and "
                    "amr_eval/<line>, the exact maximum of that program's own objective (its compute_pool weights: "
                    "one-to-one node mapping over its candidate pairs; _ilp_optimum, mip CBC, 120 s limit, skipped "
                    "where a bound shows the hill-climbing optimal); unproven: searches whose ILP hit the limit; "
                    "smatchpp_bound: the ILP status bounds where smatchpp did not prove its optimum",
        "dropped": "dropped[]: {id, peer, reason} for pairs a peer (or amrsim's ud parser) could not read; such "
                   "pairs are left out of pairs[] and of the corpus sums",
        "corpus": "sources[src].micro_counts: per-pair counts summed over the source's pairs (amr-evaluation's "
                  "whole-file numbers are micro: one file pair per source gives these sums, with best-of-20 "
                  "searches); amr_eval_lines = its print-out formatted from them; scores_py_stdout_whole_source = "
                  "the unmodified scores.py run once on the source's pairs as two files (informative: one "
                  "hill-climbing run per pair)",
    }


def _run_note(seconds: float, jobs: int) -> str:
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "amrsim/amr/ud.py", "amrsim/amr/ud_lexicons")
    return (f"peer runs {seconds:.0f} s with --jobs {jobs}; lp-ud parses by amrsim at commit {git('rev-parse', 'HEAD')}"
            + (" with uncommitted changes to the ud parser" if dirty else " (ud parser unmodified)"))


def generate(args: argparse.Namespace) -> None:
    peers = args.peers.resolve()
    inputs = _inputs(args.shared)
    ids = select_pairs(inputs)
    print(f"{len(ids)} pairs selected; parsing the lp-ud sentences with amrsim's ud parser ...", flush=True)
    ud = _ud_parses(inputs, ids)
    dropped: list[dict] = []
    pairs: list[dict] = []
    for i in ids:
        stored = None
        if source_of(i) == "lp-ud":
            stored, err = ud[i]
            if stored is None:
                dropped.append({"id": i, "peer": "amrsim ud parser", "reason": f"no parse: {err}"})
                continue
        a, b = inputs.pair(i, stored)
        pairs.append({"id": i, "amr1": a, "amr2": b, **({"stored": stored} if stored is not None else {})})
    if args.limit:
        pairs = pairs[: args.limit]
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        chunk = max(1, -(-len(pairs) // (4 * args.jobs)))
        slim = [{"id": p["id"], "amr1": p["amr1"], "amr2": p["amr2"]} for p in pairs]
        jobs = [(kind, slim[k:k + chunk]) for kind in ("pypi", "amr_eval") for k in range(0, len(slim), chunk)]
        jobs += [("wlk_check", slim), ("wlk_conv", slim)]
        t0 = time.perf_counter()
        res = _run_workers(jobs, peers, work, args.jobs)
        print(f"peer workers: {time.perf_counter() - t0:.0f} s", flush=True)
        merged: dict[str, dict] = {p["id"]: {} for p in pairs}
        for recs in res.values():
            for r in recs:
                if "error" in r:
                    merged[r["id"]].setdefault("errors", []).append(r["error"])
                for k, v in r.items():
                    if k in ("amr_eval", "optimum"):
                        merged[r["id"]].setdefault(k, {}).update(v)
                    elif k == "unproven":
                        merged[r["id"]].setdefault(k, []).extend(v)
                    elif k not in ("id", "error"):
                        merged[r["id"]][k] = v
        keep = []
        for p in pairs:
            m = merged[p["id"]]
            if m.get("errors"):
                peer, reason = m["errors"][0]
                dropped.append({"id": p["id"], "peer": peer, "reason": reason})
            else:
                keep.append(p)
        wlk = _wlk_reference(keep, peers, work)
        records = []
        for p in keep:
            m = merged[p["id"]]
            rec = {"id": p["id"]}
            if "stored" in p:
                rec["amr1"] = p["stored"]
            rec["smatch_104"] = m["smatch_104"]
            rec["smatchpp"] = m["smatchpp"]
            if "smatchpp_bound" in m:
                rec["smatchpp_bound"] = m["smatchpp_bound"]
            rec["wlk"] = wlk[p["id"]]
            rec["wlk_conv"] = m["wlk_conv"]
            rec["amr_eval"] = {k: m["amr_eval"][k] for k in AE_LINES if k != "Smatch"}
            for k in ("optimum", "unproven"):
                if m.get(k):
                    rec[k] = m[k]
            records.append(rec)
        sources = {}
        by_source: dict[str, list[dict]] = defaultdict(list)
        texts = {p["id"]: p for p in keep}
        for r in records:
            by_source[source_of(r["id"])].append(r)
        for source, recs in by_source.items():
            stdout = None if args.no_scores_py else _scores_py_whole([texts[r["id"]] for r in recs], peers, work,
                                                                     source)
            sources[source] = _corpus(recs, stdout)
            sources[source]["dropped"] = sum(1 for d in dropped if source_of(d["id"]) == source)
    reference = _reference_header(peers)
    reference["run"] = _run_note(time.perf_counter() - t0, args.jobs)
    data = {"reference": reference, "sources": sources, "dropped": dropped, "pairs": records}
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as f:
        f.write(gzip.compress(raw, compresslevel=9, mtime=0))
    print(f"wrote {args.out}: {len(records)} pairs, {len(dropped)} dropped, {args.out.stat().st_size} bytes")
    for reason, n in Counter((d["peer"], d["reason"][:60]) for d in dropped).most_common():
        print(f"  dropped {n}: {reason}")


# ------------------------------------------------------------------------------------- compare (amrsim's venv) ---


def load_data(path: Path = DATA_FILE) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


OUTCOMES = ("agree", "at_opt", "vacuous", "diff_hi", "diff_lo")


class Tally:
    """Per (peer, aspect): how many pairs fall into each outcome, and example ids of the differing ones."""

    def __init__(self):
        self.rows: dict[tuple[str, str], Counter] = defaultdict(Counter)
        self.examples: dict[tuple[str, str], list[str]] = defaultdict(list)

    def add(self, peer: str, aspect: str, outcome: str, pair_id: str, detail: str = "") -> None:
        self.rows[peer, aspect][outcome] += 1
        if outcome.startswith("diff"):
            self.examples[peer, aspect].append(f"{pair_id}  {detail}".rstrip())

    def value(self, peer: str, aspect: str, pair_id: str, mine: float, peer_value: float, detail: str = "",
              optimum_value: float | None = None) -> None:
        self.add(peer, aspect, _classify(mine, peer_value, optimum_value), pair_id, detail)


def _classify(mine: float, peer_value: float, optimum_value: float | None = None, vacuous: bool = False) -> str:
    """One value against the peer's: equal (abs TOL: agree); equal to the exact optimum of the peer's own objective
    where its hill-climbing stopped below it (at_opt); the vacuous-agreement convention, neither graph having the
    structure (vacuous: amrsim 1.0, the reference 0); else amrsim above / below the peer (diff_hi / diff_lo)."""
    if vacuous and abs(mine - 1.0) <= TOL:
        return "vacuous"
    if not vacuous and abs(mine - peer_value) <= TOL:
        return "agree"
    if optimum_value is not None and abs(mine - optimum_value) <= TOL:
        return "at_opt"
    return "diff_hi" if mine > peer_value else "diff_lo"


def _amrsim_views(a: str, b: str, convention: str):
    """amrsim's per-graph views as its aspect code builds them (GraphView.read where it exists)."""
    from amrsim.amr.graph import smatch_triples
    from amrsim.metrics.aspects import GraphView

    if hasattr(GraphView, "read"):
        return GraphView.read(a, convention), GraphView.read(b, convention)
    return GraphView(smatch_triples(a, convention)), GraphView(smatch_triples(b, convention))


def _has_duplicates(text: str) -> bool:
    from amrsim.amr.graph import smatch_triples

    t = smatch_triples(text, "smatch")
    return len(set(t.relations)) < len(t.relations) or len(set(t.attributes)) < len(t.attributes)


def _raised(e: Exception) -> str:
    return f"amrsim raised {type(e).__name__}: {e}"[:160]


def compare(args: argparse.Namespace) -> None:
    import amrsim.metrics.aspects as aspects_mod
    from amrsim.amr.graph import smatch_triples
    from amrsim.metrics.smatch import smatch
    from amrsim.metrics.wlk import wlk

    t0 = time.perf_counter()
    data = load_data(args.data)
    inputs = _inputs(args.shared)
    tally = Tally()
    counted = [AE_TO_AMRSIM[k] for k in AE_LINES if k != "Smatch"]
    has_counts = hasattr(aspects_mod, "aspect_counts")
    counting = {} if args.counting is None else {"counting": args.counting}  # amrsim's set-aspect counting
    pairs = [p for p in data["pairs"] if args.source is None or source_of(p["id"]) == args.source]
    errors: Counter = Counter()
    for p in pairs:
        pid = p["id"]
        try:
            a, b = inputs.pair(pid, p.get("amr1"))
        except (OSError, KeyError, IndexError, ValueError) as e:
            errors[f"{type(e).__name__}"] += 1
            continue
        opt = p.get("optimum", {})
        # smatch 1.0.4: counts; its hill-climbing may stop below the optimum of its own objective (`optimum`)
        s104 = None
        try:
            s104 = smatch(smatch_triples(a, "smatch"), smatch_triples(b, "smatch"))
            m, n1, n2 = p["smatch_104"]
            detail = f"amrsim {[s104.matched, s104.n1, s104.n2]} peer {p['smatch_104']}" + (
                f" (peer optimum {opt['smatch_104']})" if "smatch_104" in opt else "")
            if (s104.n1, s104.n2) != (n1, n2):
                outcome = "diff_hi" if s104.n1 + s104.n2 > n1 + n2 else "diff_lo"
                detail += " (triple counts differ)"
            else:
                outcome = _classify(s104.matched, m, opt.get("smatch_104"))
            if outcome.startswith("diff") and (_has_duplicates(a) or _has_duplicates(b)):
                detail += " [a graph repeats a triple: smatch 1.0.4 matches each copy]"
            tally.add("smatch_104", "Smatch counts", outcome, pid, detail)
        except Exception as e:  # noqa: BLE001
            tally.add("smatch_104", "Smatch counts", "diff_lo", pid, _raised(e))
        # smatchpp: exact on both sides, counts must be equal
        try:
            s = smatch(smatch_triples(a, "amr"), smatch_triples(b, "amr"))  # (amrsim's dereify table is penman's)
            got, peer = [s.matched, s.n1, s.n2], p["smatchpp"]
            if got == peer:
                tally.add("smatchpp", "Smatch ILP (AMR standardiser)", "agree", pid)
            else:
                hi = _f(*got)[2] > _f(*peer)[2]
                tally.add("smatchpp", "Smatch ILP (AMR standardiser)", "diff_hi" if hi else "diff_lo", pid,
                          f"amrsim {got} peer {peer}")
        except Exception as e:  # noqa: BLE001
            tally.add("smatchpp", "Smatch ILP (AMR standardiser)", "diff_lo", pid, _raised(e))
        # WLK: the reference, and the reference with amrsim's documented conventions
        try:
            v = wlk(a, b, k=2)
            for key in ("wlk", "wlk_conv"):
                tally.value(key, "WLK k=2", pid, v, p[key], f"amrsim {v:.6f} peer {p[key]:.6f}")
        except Exception as e:  # noqa: BLE001
            for key in ("wlk", "wlk_conv"):
                tally.add(key, "WLK k=2", "diff_lo", pid, _raised(e))
        # amr-evaluation: amrsim's per-pair F1 against the F1 of the peer's counts (the reference's rule); its Smatch
        # line is amrsim's Smatch F1 (the smatch() above, what aspect_scores' smatch_f1 is)
        try:
            g1, g2 = _amrsim_views(a, b, "smatch")
            got = aspects_mod.aspect_scores(g1, g2, counted, vector=lambda c: None, **counting)
            if s104 is None:
                raise ValueError("smatch failed")
            got["smatch_f1"] = s104.f1
        except Exception as e:  # noqa: BLE001
            for line in AE_LINES:
                tally.add("amr_eval", line, "diff_lo", pid, _raised(e))
            continue
        outcomes = {}
        for line in AE_LINES:
            key = "smatch_104" if line == "Smatch" else f"amr_eval/{line}"
            peer = p["smatch_104"] if line == "Smatch" else p["amr_eval"][line]
            outcomes[line] = _classify(got[AE_TO_AMRSIM[line]], _f(*peer)[2],
                                       _f(opt[key], *peer[1:])[2] if key in opt else None,
                                       line not in ("Smatch", "Unlabeled", "No WSD") and peer[1] == 0 == peer[2])
        mine_counts = {}
        if has_counts and any(o.startswith("diff") for o in outcomes.values()):  # amrsim's counts, for the examples
            try:
                mine_counts = aspects_mod.aspect_counts(g1, g2, counted, **counting)
            except Exception:  # noqa: BLE001
                mine_counts = {}
        for line, outcome in outcomes.items():
            key = "smatch_104" if line == "Smatch" else f"amr_eval/{line}"
            peer = p["smatch_104"] if line == "Smatch" else p["amr_eval"][line]
            name = AE_TO_AMRSIM[line]
            c = [s104.matched, s104.n1, s104.n2] if line == "Smatch" else mine_counts.get(name)
            detail = f"F1 amrsim {got[name]:.4f} peer {_f(*peer)[2]:.4f}; counts peer {peer}" + (
                f" amrsim {list(c)}" if c is not None else "") + (f" peer optimum {opt[key]}" if key in opt else "")
            tally.add("amr_eval", line, outcome, pid, detail)
    _print(tally, data, len(pairs), args.examples, time.perf_counter() - t0, errors, has_counts)


def _print(tally: Tally, data: dict, n: int, examples: int, elapsed: float, errors: Counter,
           has_counts: bool) -> None:
    src = Counter(source_of(p["id"]) for p in data["pairs"])
    print(f"{len(data['pairs'])} pairs ({', '.join(f'{k} {v}' for k, v in src.items())}; {len(data['dropped'])} "
          f"dropped when generated); compared {n} in {elapsed:.1f} s"
          + ("" if has_counts else " (amrsim has no aspect_counts: F1 only)"))
    if errors:
        print("  pair inputs not found: " + ", ".join(f"{k} {v}" for k, v in errors.items()))
    print("agree: F1 (or WLK) within 1e-6, smatch_104: equal counts; at_opt: the peer's hill-climbing stopped below "
          "the exact optimum of its own objective and amrsim equals that optimum; vacuous: neither graph has the "
          "structure (reference 0, amrsim 1.0); diff_hi / diff_lo: amrsim above / below the peer")
    head = f"{'peer':<10} {'aspect':<30} {'pairs':>6}" + "".join(f" {o:>7}" for o in OUTCOMES)
    print(head)
    print("-" * len(head))
    for (peer, aspect), c in tally.rows.items():
        print(f"{peer:<10} {aspect:<30} {sum(c.values()):>6}" + "".join(f" {c[o]:>7}" for o in OUTCOMES))
    if examples:
        for (peer, aspect), ex in tally.examples.items():
            if ex:
                print(f"\n{peer} / {aspect}: {len(ex)} differ, e.g.")
                for e in ex[:examples]:
                    print(f"    {e}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_peer":
        _peer_main(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="rerun the peers and write the data file")
    g.add_argument("--peers", type=Path, required=True, help="PEERS: venv/ (python 3.11) and ref/ (reference code)")
    g.add_argument("--shared", type=Path, default=SHARED)
    g.add_argument("--out", type=Path, default=DATA_FILE)
    g.add_argument("--jobs", type=int, default=1, help="peer worker processes at once")
    g.add_argument("--work", type=Path, default=None, help="where the temporary files go (default: the system's)")
    g.add_argument("--limit", type=int, default=None, help="only the first N pairs (a trial run)")
    g.add_argument("--no-scores-py", action="store_true", help="skip the whole-source scores.py print-out")
    c = sub.add_parser("compare", help="amrsim against the stored peer outputs")
    c.add_argument("--data", type=Path, default=DATA_FILE)
    c.add_argument("--shared", type=Path, default=SHARED)
    c.add_argument("--source", choices=("lp-ud", "lp-next", "bamboo"), default=None)
    c.add_argument("--examples", type=int, default=3, help="example ids of differing pairs per row (0: none)")
    c.add_argument("--counting", choices=("set", "multiset"), default=None,
                   help="passed to amrsim's aspect_scores / aspect_counts for the set aspects (default: amrsim's)")
    args = ap.parse_args()
    generate(args) if args.cmd == "generate" else compare(args)


if __name__ == "__main__":
    main()
