"""The evaluate stage: the pure evaluators of `amrsim.evaluate` fed from the warehouse (embeddings through the
cache), each result appended to `eval/results` once per (evaluation, model, input content) with a lineage row, the
model cards of the runs it names rewritten, and the report rendered from them. One module per evaluation (`sts`,
`bitext`, `transfer`, `aspects`, `ood`), `one_off` for a file given on the command line, `suite` for a pipeline's
`evaluate:` section, `results` for the table."""

from amrsim.stages.evaluate.aspects import aspects_eval
from amrsim.stages.evaluate.bitext import bitext_eval, bucc_eval
from amrsim.stages.evaluate.mteb_export import export_mteb, model_facts, parse_task_overrides
from amrsim.stages.evaluate.one_off import ingest_one_off, one_off_pairs
from amrsim.stages.evaluate.ood import evaluate_ood
from amrsim.stages.evaluate.report import write_report
from amrsim.stages.evaluate.results import migrate_results
from amrsim.stages.evaluate.sts import is_cross_encoder, results_table, sts_stage
from amrsim.stages.evaluate.suite import pipeline_sts, run_suite
from amrsim.stages.evaluate.transfer import transfer_eval

__all__ = ["aspects_eval", "bitext_eval", "bucc_eval", "evaluate_ood", "export_mteb", "ingest_one_off",
           "is_cross_encoder", "migrate_results", "model_facts", "one_off_pairs", "parse_task_overrides",
           "pipeline_sts", "results_table", "run_suite", "sts_stage", "transfer_eval", "write_report"]
