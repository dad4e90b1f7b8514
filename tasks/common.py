"""What every stage task shares: no retries for bad input, the warehouse as the only cache, batches spread with the
Ray helper."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import polars as pl
from prefect.cache_policies import NONE

from amrsim.config import Pipeline
from amrsim.errors import AmrsimError
from tasks.ray_map import map_batches


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
