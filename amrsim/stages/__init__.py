"""Stage bodies the Prefect tasks call, one module per stage (as tasks/): each reads the warehouse, computes only
missing keys, commits in chunks and records lineage."""

from amrsim.stages.augment import augment_stage, cross_encoder_scorer
from amrsim.stages.encode import encode_stage
from amrsim.stages.evaluate import results_table, sts_stage
from amrsim.stages.ingest import ingest_stage, ingest_tables
from amrsim.stages.metrics import metric_graph_pairs, metrics_stage, stream_graph_pairs
from amrsim.stages.parse import parse_stage, parse_todo
from amrsim.stages.translate import english_translation_key, translate_stage

__all__ = [
    "augment_stage", "cross_encoder_scorer", "encode_stage", "english_translation_key", "ingest_stage",
    "ingest_tables", "metric_graph_pairs", "metrics_stage", "parse_stage", "parse_todo", "results_table",
    "stream_graph_pairs", "sts_stage", "translate_stage",
]
