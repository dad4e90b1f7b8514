"""GPU throughput benchmarks of the generators, runnable with torch and transformers alone: translation
(`translate`: opus-mt-en-de-shaped MarianMT), parsing (`parse`: bart-base/large-shaped parse_xfm) and the one-call
device check over both (`check`: `python -m amrsim.bench.check --out FILE`). Nothing here reads the warehouse or
needs amrsim's compiled graph reader, so the package imports none of those."""

__all__: list[str] = []
