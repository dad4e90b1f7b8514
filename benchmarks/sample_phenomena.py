"""What cosine misses on the bundled sample, and what the AMR metrics see: the README's "Why AMR" table.

Parses the English side of amrsim/sample/sts_pairs.tsv with the offline `ud` parser, scores each graph pair with
the metrics engine, embeds both sentences with MiniLM, and prints per phenomenon the mean gold score (scaled to 0-1),
the mean cosine, the mean Smatch F1 and the aspect that tracks the phenomenon, plus one example pair each.
Run: `python benchmarks/sample_phenomena.py` (no network, no GPU; about a minute on 2 cores).
"""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl
from scipy.stats import spearmanr

from amrsim.amr.parsing import ParserSpec, parse_texts
from amrsim.config import SAMPLE_DIR
from amrsim.methods.loaders import load_encoder
from amrsim.metrics.engine import MetricsOptions, score_pairs

# phenomenon -> the aspect that looks at it (None: Smatch alone); paraphrase and unrelated are the contrast rows
PHENOMENA = {"negation": "negation", "role_swap": "srl", "quantity": "quant_sim", "paraphrase": None,
             "unrelated": None}
# one example pair per phenomenon, by id in the sample
EXAMPLES = {"negation": "p020", "role_swap": "p001", "quantity": "p019"}


def score_sample(encoder: str = "minilm") -> pl.DataFrame:
    """One row per English sample pair: gold/5, cosine of `encoder`, Smatch F1 and the tracked aspects."""
    pairs = pl.read_csv(SAMPLE_DIR / "sts_pairs.tsv", separator="\t", quote_char=None)
    texts = sorted(set(pairs["sentence1"]) | set(pairs["sentence2"]))
    results, _ = parse_texts(ParserSpec("ud", "en"), texts)
    graph = {t: r.penman for t, r in zip(texts, results, strict=True)}
    aspects = ("smatch", *sorted({a for a in PHENOMENA.values() if a}))
    frame = pairs.with_columns(amr1=pairs["sentence1"].replace_strict(graph),
                               amr2=pairs["sentence2"].replace_strict(graph))
    scored = score_pairs(frame, MetricsOptions(aspects=aspects))
    vectors = load_encoder(encoder).encode(texts)
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    row = {t: i for i, t in enumerate(texts)}
    cosine = [float(vectors[row[a]] @ vectors[row[b]]) for a, b in zip(pairs["sentence1"], pairs["sentence2"],
                                                                         strict=True)]
    return scored.with_columns(cosine=pl.Series(cosine), gold=pl.col("score") / 5)


def spearman(part: pl.DataFrame, column: str) -> str:
    """Spearman x 100 of `column` vs gold; `undefined` where either is constant."""
    rho = spearmanr(part[column], part["gold"]).statistic
    return "undefined" if np.isnan(rho) else f"{100 * rho:.1f}"


def phenomenon_table(scored: pl.DataFrame) -> str:
    lines = ["| phenomenon | pairs | mean gold (0-1) | mean MiniLM cosine | mean Smatch F1 | mean of its aspect "
             "| Spearman × 100 vs gold: cosine / Smatch / aspect |", "|---|---|---|---|---|---|---|"]
    for name, aspect in PHENOMENA.items():
        part = scored.filter(pl.col("phenomenon") == name)
        tracked = f"`{aspect}` {part[aspect].mean():.2f}" if aspect else "—"
        ranks = " / ".join([spearman(part, "cosine"), spearman(part, "smatch_f1")]
                           + ([spearman(part, aspect)] if aspect else []))
        lines.append(f"| {name.replace('_', ' ')} | {part.height} | {part['gold'].mean():.2f} | "
                     f"{part['cosine'].mean():.2f} | {part['smatch_f1'].mean():.2f} | {tracked} | {ranks} |")
    return "\n".join(lines)


def example_table(scored: pl.DataFrame) -> str:
    lines = ["| phenomenon | sentence 1 / sentence 2 | gold (0-1) | MiniLM cosine | Smatch F1 | aspect |",
             "|---|---|---|---|---|---|"]
    for name, pair_id in EXAMPLES.items():
        r = scored.filter(pl.col("id") == pair_id).row(0, named=True)
        aspect = PHENOMENA[name]
        lines.append(f"| {name.replace('_', ' ')} | {r['sentence1']} / {r['sentence2']} | {r['gold']:.2f} | "
                     f"{r['cosine']:.2f} | {r['smatch_f1']:.2f} | `{aspect}` {r[aspect]:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="minilm")
    args = parser.parse_args()
    scored = score_sample(args.encoder)
    failed = scored.filter(pl.col("status") != "ok").height
    print(phenomenon_table(scored), "", example_table(scored), "", f"failed pairs: {failed}", sep="\n")


if __name__ == "__main__":
    main()
