"""Warehouse contract: Delta tables, content keys, upserts, lineage and DuckDB views."""

from amrsim.warehouse.keys import config_hash, content_key
from amrsim.warehouse.lock import TableBusy
from amrsim.warehouse.store import FAILED, OK, BrokenTable, Warehouse

__all__ = ["FAILED", "OK", "BrokenTable", "TableBusy", "Warehouse", "config_hash", "content_key"]
