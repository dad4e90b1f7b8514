"""Flow helpers: load and validate the config before any task runs."""

from __future__ import annotations

from typing import Any

from amrsim.config import LoadedConfig, load_config


def load(config: str, pipeline: str | None, overrides: dict[str, Any] | None) -> tuple[LoadedConfig, str]:
    from amrsim.secrets import install_log_redaction

    install_log_redaction()  # a deployment's flow run starts here, not in the CLI: mask secrets in its logs too
    cfg = load_config(config, overrides=overrides, pipeline=pipeline)
    name, _ = cfg.pipeline(pipeline)  # checks input files exist
    return cfg, name
