"""Secrets (hub tokens, cloud credentials) come only from the environment; `redact` masks them, and token-shaped
strings, in anything amrsim writes to the warehouse (lineage errors, run metadata) or to logs."""

from __future__ import annotations

import logging
import os
import re
from typing import Any

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
