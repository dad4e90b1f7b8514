"""Secrets (hub tokens, cloud credentials) come only from the environment; `redact` masks them, and token-shaped
strings, in anything amrsim writes to the warehouse (lineage errors, run metadata) or to logs; `seal` keeps a
`--set` value that holds one out of a flow run's parameters, which Prefect stores."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
from typing import Any

from amrsim.errors import ConfigError

MASK = "***"
# read by huggingface_hub, boto3/s3fs, azure, google-auth, Prefect, W&B, git hosts: never a pipelines.yaml key
SECRET_ENV_VARS = (
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN",
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_SECRET", "GOOGLE_APPLICATION_CREDENTIALS", "PREFECT_API_KEY", "WANDB_API_KEY", "GITHUB_TOKEN",
    "GH_TOKEN",
)
# any other variable named like a secret (MY_SERVICE_TOKEN, DB_PASSWORD) is treated as one too
SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|ACCOUNT_KEY|PRIVATE_KEY|CREDENTIALS|"
                         r"CONNECTION_STRING)(_ID)?$", re.IGNORECASE)
MIN_SECRET_LEN = 8  # shorter values ("test", "1") would mask ordinary words in the data
TOKEN_PATTERNS = (
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),  # Hugging Face access token
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),  # AWS access key id
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub token
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),  # user:password@ in a URL
    re.compile(r"(?<=:/)(?!/)[^/\s:@]+:[^/\s@]+(?=@)"),  # the same URL as a path makes it (https:/user:pw@host)
    re.compile(r"(?<=AccountKey=)[^;\s]+|(?<=SharedAccessSignature=)[^;\s]+"),  # Azure connection string parts
)


def is_secret_name(name: str) -> bool:
    """An environment variable (or config key) that holds a credential."""
    return name.upper() in SECRET_ENV_VARS or bool(SECRET_NAME.search(name))


def secret_values(environ: Any = None) -> list[str]:
    """Values of the secret variables set now, longest first (so a value containing another is masked whole)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact(text: str | None) -> str | None:
    """`text` with every secret environment value and every token-shaped string replaced by ***."""
    if not text:
        return text
    for value in secret_values():
        text = text.replace(value, MASK)
    for pattern in TOKEN_PATTERNS:
        text = pattern.sub(MASK, text)
    return text


def redact_obj(obj: Any) -> Any:
    """`redact` applied to every string (keys and values) in nested dicts, lists and tuples."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact_obj(k): redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(redact_obj(v) for v in obj)
    return obj


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed record: the handler reports it as usual
        return
    masked = redact(message)
    if masked != message:
        record.msg, record.args = masked, None
    if record.exc_info and not record.exc_text:
        record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
    elif record.exc_text:
        record.exc_text = redact(record.exc_text)


class RedactingFilter(logging.Filter):
    """A handler filter that masks secrets in each record's message and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        _redact_record(record)
        return True


def install_log_redaction() -> None:
    """Mask secrets in every log record of the process (all loggers, all handlers, also ones added later); idempotent.
    Call once at start-up (the CLI)."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "amrsim_redacting", False):
        return

    def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        _redact_record(record)
        return record

    redacting_factory.amrsim_redacting = True  # type: ignore[attr-defined]
    redacting_factory.amrsim_wrapped = factory  # type: ignore[attr-defined]
    logging.setLogRecordFactory(redacting_factory)


def remove_log_redaction() -> None:
    """Undo `install_log_redaction` (the factory it wrapped is restored); a no-op when it is not installed. For
    tests, which must see records unmasked whatever an earlier test in the same process installed."""
    factory = logging.getLogRecordFactory()
    if getattr(factory, "amrsim_redacting", False):
        logging.setLogRecordFactory(factory.amrsim_wrapped)  # type: ignore[attr-defined]


# --- flow parameters: Prefect stores a flow run's parameters in its database (and shows them in its UI) ---

SEALED = "amrsim-secret:"  # a sealed value's placeholder in a flow's parameters: this prefix and 16 hex digits
_SEAL_KEY = os.urandom(32)  # per process: a placeholder names its value in this run and reveals nothing of it
_sealed: dict[str, Any] = {}  # placeholder -> value; this process's memory is the only place the values go


def holds_secret(value: Any, key: str | None = None) -> bool:
    """Whether a config value (any nesting) holds a credential: it sits under a key named like one (`*_token`,
    `password`, ...; for a dotted `--set` key its last part), or `redact` masks a string in it (a URL's password,
    a token-shaped string, the value of a secret environment variable)."""
    return _secret_at(value, key) is not None


def _secret_at(value: Any, key: str | None, path: str = "") -> str | None:
    """The key path of the first secret in `value` ('' for `value` itself), or None."""
    if isinstance(value, str) and value.startswith(SEALED):
        return None
    if key is not None and value is not None and is_secret_name(str(key).rsplit(".", 1)[-1]):
        return path
    if isinstance(value, str):
        return path if redact(value) != value else None
    if isinstance(value, dict):
        for k, v in value.items():
            inner = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and redact(k) != k:
                return inner
            if (found := _secret_at(v, str(k), inner)) is not None:
                return found
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            if (found := _secret_at(v, None, f"{path}[{i}]")) is not None:
                return found
    return None


def _placeholder(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str).encode()
    placeholder = SEALED + hmac.new(_SEAL_KEY, text, hashlib.sha256).hexdigest()[:16]
    _sealed[placeholder] = value
    return placeholder


def seal(obj: Any, key: str | None = None) -> Any:
    """`obj` (`--set` overrides, `--param` params) as a flow run's parameters may hold it: each string that holds a
    secret, and each value under a key named like a credential, is replaced by a placeholder, `amrsim-secret:<16
    hex>` (an HMAC under a key of this process), and kept in this process's memory, where `unseal` finds it; the
    other values stay as they are."""
    if isinstance(obj, str) and obj.startswith(SEALED):
        return obj
    if key is not None and obj is not None and is_secret_name(key.rsplit(".", 1)[-1]):
        return _placeholder(obj)
    if isinstance(obj, dict):
        return {_placeholder(k) if isinstance(k, str) and redact(k) != k else k: seal(v, str(k))
                for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(seal(v) for v in obj)
    return _placeholder(obj) if isinstance(obj, str) and redact(obj) != obj else obj


def unseal(obj: Any, what: str = "overrides") -> Any:
    """A flow's parameter `what` as `seal` made it, with the sealed values back. A secret in the clear (a direct
    call or a deployment run given one: Prefect has stored it with the run), or a placeholder this process did not
    make (a flow run started again from Prefect's UI), is a ConfigError saying how secrets reach a run."""
    if (where := _secret_at(obj, None)) is not None:
        raise ConfigError(f"{what}{f' key {where!r}' if where else ''}: holds a secret (a URL with a password, a "
                          f"token, a key named like a credential); a flow run's parameters are stored by the Prefect "
                          f"server, so they must not: `amrsim run --set` and `amrsim train --set` pass such a value "
                          f"outside Prefect; a deployment reads it from its pipelines.yaml and credentials from the "
                          f"worker's environment (docs/operations.md#security)")

    def walk(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(SEALED):
            if value not in _sealed:
                raise ConfigError(f"{what}: '{value}' stands for a secret given to another process (amrsim run "
                                  f"--set), which only that process holds: start the run again with amrsim run, "
                                  f"or put the value in pipelines.yaml (docs/operations.md#security)")
            return _sealed[value]
        if isinstance(value, dict):
            return {walk(k): walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(walk(v) for v in value)
        return value

    return walk(obj)
