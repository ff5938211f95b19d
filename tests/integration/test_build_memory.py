"""A first load's HNSW build runs with the memory ragstore sizes for it (ragstore/families/build_memory.py),
as the owner and as the app (through ragstore.family_build_hnsw), in each storage, and with every worker the
rule asks for.

pgvector says when the graph outgrows maintenance_work_mem ("hnsw graph no longer fits into
maintenance_work_mem after N tuples"): capped at 1MB by $RAGSTORE_BUILD_MEMORY, the build reports that after
about 1MB / (bytes per row of the rule) tuples, so the sized value is the one the build ran with; sized for
its rows, the same build never reports it."""

import re

import pytest

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.external import ExternalBackend
from ragstore.families import build_memory
from ragstore.families import storage as storages
from ragstore.ingest import writer
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.toolkit.roles import app_dsn  # noqa: F401 - a fixture
from tests.toolkit.storage import DIM, STORAGES, clustered, write_chunks

# Over the writer's bulk threshold (lowered to BULK here), so the load drops the index and builds it at its
# end; a 32-d graph of 3,000 rows holds 2.1-2.5MB, over the 1MB cap in every storage (1MB holds 1,224-1,432
# rows by the rule). Half the rows of the writer's own threshold halve the test's time and prove the same.
ROWS = 3000
BULK = 2000
FITS = re.compile(r"no longer fits into maintenance_work_mem after (\d+) tuples")
LAUNCHED = re.compile(r"using (\d+) parallel workers")  # pgvector's DEBUG1 notice: the workers launched


@pytest.fixture(autouse=True)
def _bulk_from_fewer_rows(monkeypatch):
    monkeypatch.setattr(writer, "BULK_THRESHOLD", BULK)


def first_load(owner, loader, tmp_path, storage):
    """Create an external family as the owner, bulk-load ROWS rows through ``loader``; pgvector's notices."""
    options = {"dimensions": DIM, **storages.storage_options(storage, None)}
    families.create_family(owner, "ext", ExternalBackend("mine", DIM), options=options)
    owner.commit()
    notices: list[str] = []
    loader.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
    index_sources(loader, "ext", open_sources([str(write_chunks(tmp_path / "ext.jsonl", clustered(ROWS)))]))
    family = families.get_family(owner, "ext")
    assert families.has_hnsw_index(owner, family)
    return notices


def tuples_that_fit(notices):
    found = [int(m.group(1)) for n in notices if (m := FITS.search(n))]
    return found[0] if found else None


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("role", ["owner", "app"])
def test_a_capped_build_runs_with_the_cap(conn, dsn, app_dsn, tmp_path, monkeypatch, storage, role):  # noqa: F811
    monkeypatch.setenv("RAGSTORE_BUILD_MEMORY", "1MB")
    with connect(app_dsn if role == "app" else dsn) as loader:
        notices = first_load(conn, loader, tmp_path, storage)
        # SET LOCAL: the session is back at the server's value once the build's transaction ended
        assert (
            loader.execute("SHOW maintenance_work_mem").fetchone()
            == conn.execute("SHOW maintenance_work_mem").fetchone()
        )
    fitted = tuples_that_fit(notices)
    per_row = build_memory.hnsw_need(1, storage, "vector", DIM)
    assert fitted is not None, notices
    # the build ran with 1MB, and the rule's bytes per row are what pgvector counted, or up to 10% more
    assert 0.98 <= fitted * per_row / (1024 * 1024) <= 1.1


@pytest.mark.parametrize("storage", STORAGES)
def test_a_build_sized_for_its_rows_stays_in_memory(conn, dsn, tmp_path, monkeypatch, storage):
    monkeypatch.delenv("RAGSTORE_BUILD_MEMORY", raising=False)
    with connect(dsn) as loader:
        notices = first_load(conn, loader, tmp_path, storage)
    assert tuples_that_fit(notices) is None, notices


def test_a_first_load_builds_with_every_worker_the_rule_asks_for(conn, dsn, tmp_path, monkeypatch):
    # PostgreSQL launches a worker only while maintenance_work_mem gives each participant 32MB: at the 64MB
    # floor it would launch one of two. The table is small, so its own size rule is lifted for this session;
    # two workers (the rule's on 1-3 cores) whatever the cores of the machine running the test.
    monkeypatch.delenv("RAGSTORE_BUILD_MEMORY", raising=False)
    monkeypatch.setattr(build_memory, "parallel_workers", lambda: 2)
    with connect(dsn) as loader:
        loader.execute("SET min_parallel_table_scan_size = 0")
        loader.execute("SET client_min_messages = debug1")
        loader.commit()
        notices = first_load(conn, loader, tmp_path, "vector")
    launched = [int(m.group(1)) for n in notices if (m := LAUNCHED.search(n))]
    assert launched == [2], notices
