"""A temporary Prefect server in a new Prefect home starts from a saved, empty, migrated database
(`flows.runtime.seed_database`): the first server on a machine saves it, later new homes copy it in, and nothing
replaces a home's own database or trusts a template that is not a plain file."""

from __future__ import annotations

import sqlite3
import urllib.request

import pytest

from flows import runtime


@pytest.fixture
def homes(tmp_path, monkeypatch):
    """XDG_CACHE_HOME and PREFECT_HOME under tmp_path, no database URL configured; returns a home setter."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in runtime.DATABASE_URL_SETTINGS:
        monkeypatch.delenv(name, raising=False)

    def home(name: str):
        monkeypatch.setenv("PREFECT_HOME", str(tmp_path / name))
        return tmp_path / name

    return home


def tables(path) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: db.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}


@pytest.mark.slow
def test_the_first_server_saves_its_database_and_a_new_home_starts_from_it(homes, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    template = runtime.database_template()
    assert template is not None and not template.exists()
    for name in ("first", "second"):
        home = homes(name)
        server = runtime.TemporaryServer((home.parent / f"{name}.log").open("ab"), startup_timeout=120)
        try:
            server.start()
            assert (home / runtime.PREFECT_DB).exists() == (name == "second")  # copied in before the server starts
            server.wait_ready()
            with urllib.request.urlopen(f"{server.api_url}/flows/filter", data=b"{}", timeout=10) as response:
                assert response.status == 200  # the copied database serves the API
        finally:
            server.stop()
        saved = tables(template)
        assert saved["alembic_version"] == 1 and saved["block_type"] > 0 and saved.get("flow_run", 0) == 0
    assert tables(homes("second") / runtime.PREFECT_DB)["alembic_version"] == 1


def test_a_homes_own_database_is_never_replaced_and_only_a_plain_template_is_copied(homes, tmp_path):
    template = runtime.database_template()
    template.parent.mkdir(parents=True)
    with sqlite3.connect(template) as db:
        db.execute("CREATE TABLE alembic_version (version_num TEXT)")
    own = homes("own") / runtime.PREFECT_DB
    own.parent.mkdir()
    own.write_bytes(b"a home's own database")
    assert runtime.seed_database() is False and own.read_bytes() == b"a home's own database"

    new = homes("new") / runtime.PREFECT_DB
    assert runtime.seed_database() is False and new.read_bytes() == template.read_bytes()
    assert [p.name for p in new.parent.iterdir()] == [runtime.PREFECT_DB]  # the copy's temporary file is gone

    elsewhere = tmp_path / "elsewhere.db"
    elsewhere.write_bytes(template.read_bytes())
    template.unlink()
    template.symlink_to(elsewhere)  # a link in the cache is not amrsim's template
    linked = homes("linked") / runtime.PREFECT_DB
    assert runtime.seed_database() is True and not linked.exists()


def test_a_configured_database_url_gets_no_template(homes, monkeypatch):
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://db/prefect")
    homes("configured")
    assert runtime.database_template() is None and runtime.seed_database() is False
