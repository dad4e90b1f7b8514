"""Synthetic sentence pairs with small well-formed AMR graphs: load benchmarks and crash-recovery tests need
datasets of any size with graphs, deterministic per row."""

from __future__ import annotations

import json
import random
from pathlib import Path

CONCEPTS = ["dog", "cat", "boy", "girl", "house", "city", "car", "book", "tree", "river", "teacher", "child"]
FRAMES = ["run-01", "eat-01", "see-01", "want-01", "give-01", "read-01", "say-01", "buy-01", "like-01", "go-02"]
MODS = ["big", "red", "old", "new", "small", "happy"]
HEADER = ["id", "split", "score", "sentence1", "sentence2", "amr1", "amr2"]


def synthetic_graph(rng: random.Random) -> str:
    """A frame with 1-3 arguments, optional modifiers, quantities, a named entity and negation."""
    frame = rng.choice(FRAMES)
    args = []
    for i, concept in enumerate(rng.sample(CONCEPTS, rng.randint(1, 3))):
        mod = f" :mod (m{i} / {rng.choice(MODS)})" if rng.random() < 0.4 else ""
        quant = f" :quant {rng.randint(2, 9)}" if rng.random() < 0.15 else ""
        args.append(f":ARG{i} (c{i} / {concept}{mod}{quant})")
    if rng.random() < 0.2:
        args.append(':ARG2 (p / person :name (n / name :op1 "Ann"))')
    polarity = " :polarity -" if rng.random() < 0.2 else ""
    return f"(f / {frame}{polarity} " + " ".join(args) + ")"


def write_pairs(path: Path, start: int, n: int, seed: int = 0) -> None:
    """Rows start..start+n-1 of the synthetic pairs dataset as TSV (columns HEADER; provided graphs); start > 0
    appends to the file, so a dataset grows by new rows while its old rows stay byte-identical."""
    with path.open("a" if start else "w", encoding="utf-8") as f:
        if not start:
            f.write("\t".join(HEADER) + "\n")
        for i in range(start, start + n):
            rng = random.Random(seed * 1_000_003 + i)
            f.write(f"p{i}\ttrain\t{rng.uniform(0, 5):.2f}\tsentence {i} a\tsentence {i} b\t"
                    f"{synthetic_graph(rng)}\t{synthetic_graph(rng)}\n")


def pipeline_yaml(pairs_path: Path, aspects: list[str] | None = None, commit_rows: int = 20_000,
                  name: str = "load", dataset: str = "synthetic") -> str:
    """A pipelines.yaml that ingests the synthetic pairs (provided graphs) and computes their metrics."""
    columns = ", ".join(f"{c}: {c}" for c in HEADER if c != "id")
    aspects_line = f"\n      aspects: {json.dumps(aspects)}" if aspects else ""
    return f"""\
default_pipeline: {name}
warehouse: wh
run_dir: run
pipelines:
  {name}:
    datasets:
      {dataset}:
        kind: pairs
        path: {pairs_path}
        format: tsv
        score_range: [0, 5]
        columns: {{id: id, {columns}}}
    metrics:
      datasets: [{dataset}]
      parser: provided{aspects_line}
      commit_rows: {commit_rows}
"""
