"""What every stage task shares: no retries for bad input, the warehouse as the only cache, batches spread with the
Ray helper, a start and an end line in the flow run's log."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import polars as pl
from prefect.cache_policies import NONE

from amrsim.config import Pipeline
from amrsim.console import log, stage_line
from amrsim.errors import AmrsimError
from tasks.ray_map import map_batches

T = TypeVar("T")


def retry_unless_bad_input(task: Any, task_run: Any, state: Any) -> bool:
    """Retry transient failures (I/O, model errors); a bad file or config fails the same way every time."""
    try:
        state.result()
    except AmrsimError:
        return False
    except Exception:
        return True
    return False


# the warehouse's content keys decide what to compute; Prefect's own result cache would hide that
TASK_OPTIONS: dict[str, Any] = {"cache_policy": NONE, "retries": 2, "retry_delay_seconds": 2,
                                "retry_condition_fn": retry_unless_bad_input, "persist_result": False}


def spread(pipe: Pipeline, fn: Callable[[pl.DataFrame], pl.DataFrame], **options: Any
           ) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """`fn` over a frame's batches: on Ray where the pipeline's `ray` section asks for it (see `map_batches`)."""
    return partial(map_batches, fn, cfg=pipe.spec.ray, run_dir=pipe.loaded.run_dir, **options)


def told(what: str, work: Callable[[], T]) -> T:
    """`work()`, with its start, its end (a stage summary, the first of a tuple holding one, or a path) or its
    failure and the reason as lines of the run's log; a retry starts again with its own lines."""
    log.info("%s: started", what)
    try:
        out = work()
    except Exception as e:
        reason = (str(e).strip().splitlines() or [""])[0]
        log.error("%s failed: %s: %s", what, type(e).__name__, reason)
        raise
    summary = out[0] if isinstance(out, tuple) and out else out
    if isinstance(summary, dict) and "rows_in" in summary:
        log.info("%s", stage_line(what, summary))
    else:
        log.info("%s: %s", what, out if isinstance(out, str) else "done")
    return out
