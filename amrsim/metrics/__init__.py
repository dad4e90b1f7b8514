"""AMR graph metrics: Smatch, fine-grained aspects, Weisfeiler-Leman kernels; batch engine and corpus Smatch. Each
aspect is declared once in `ASPECTS` (an `Aspect`: name, columns, scorer); `register` adds one."""

from amrsim.metrics.aspects import ASPECTS, S3BERT_ASPECTS, Aspect, Pair, metric_columns, metric_fields, register
from amrsim.metrics.corpus import GoldGraphError, corpus_smatch
from amrsim.metrics.engine import (
    ALL_ASPECTS,
    METRICS_VERSION,
    MetricsOptions,
    PairScorer,
    aspect_columns,
    score_pairs,
    score_pairs_parallel,
)
from amrsim.metrics.wlk import wwlk_score

# the functions `smatch` and `wlk` keep their modules' names: `amrsim.metrics.smatch.smatch`, `amrsim.metrics.wlk.wlk`
__all__ = ["ALL_ASPECTS", "ASPECTS", "METRICS_VERSION", "S3BERT_ASPECTS", "Aspect", "GoldGraphError", "MetricsOptions",
           "Pair", "PairScorer", "aspect_columns", "corpus_smatch", "metric_columns", "metric_fields", "register",
           "score_pairs", "score_pairs_parallel", "wwlk_score"]
