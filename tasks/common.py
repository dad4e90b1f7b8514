"""What every stage task shares: no retries for bad input, the warehouse as the only cache."""

from __future__ import annotations

from typing import Any

from prefect.cache_policies import NONE

from amrsim.errors import AmrsimError


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
