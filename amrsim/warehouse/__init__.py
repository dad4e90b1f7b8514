"""Warehouse contract: Delta tables, content keys, upserts, lineage and DuckDB views."""

from amrsim.warehouse.keys import config_hash, content_key
from amrsim.warehouse.store import FAILED, OK, Warehouse

__all__ = ["FAILED", "OK", "Warehouse", "config_hash", "content_key"]
