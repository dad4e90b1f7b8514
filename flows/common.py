"""Flow helpers: load and validate the config before any task runs; the type of the `overrides` and `params`
parameters, whose schema keeps secrets out of a deployment run's parameters."""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import WithJsonSchema
from typing_extensions import TypeAliasType

from amrsim.config import LoadedConfig, load_config
from amrsim.secrets import SECRET_NAME, TOKEN_PATTERNS, unseal

# Prefect stores a flow run's parameters in its database. A deployment enforces its parameter schema, so the server
# refuses `prefect deployment run ... --param overrides=...` holding a URL password, a token-shaped string or a key
# named like a credential before the run (and its parameters) exist; `amrsim run --set` passes such values sealed
# (amrsim.secrets.seal). Only the JSON schema says so: in-process validation accepts any value, `unseal` refuses.
_NO_SECRET_TEXT = {"type": "string", "not": {"pattern": "|".join(p.pattern for p in TOKEN_PATTERNS)}}
_NO_SECRET_KEY = {"type": "string", "not": {"pattern": "(?i)" + SECRET_NAME.pattern}}
_Text = Annotated[str, WithJsonSchema(_NO_SECRET_TEXT)]
_Key = Annotated[str, WithJsonSchema(_NO_SECRET_KEY)]
_Scalar = Annotated[Any, WithJsonSchema({"type": ["number", "boolean", "null"]})]
ConfigValue = TypeAliasType(  # type: ignore[misc]
    "ConfigValue", Union[_Text, list["ConfigValue"], dict[_Key, "ConfigValue"], _Scalar])  # noqa: UP007
Overrides = dict[_Key, ConfigValue] | None  # `--set` keys and values; `params`: a method's params


def load(config: str, pipeline: str | None, overrides: dict[str, Any] | None) -> tuple[LoadedConfig, str]:
    from amrsim.secrets import install_log_redaction

    install_log_redaction()  # a deployment's flow run starts here, not in the CLI: mask secrets in its logs too
    cfg = load_config(config, overrides=unseal(overrides), pipeline=pipeline)
    name, _ = cfg.pipeline(pipeline)  # checks input files exist
    return cfg, name
