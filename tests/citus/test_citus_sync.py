"""``ragstore sync`` on the local Citus cluster: a local table of the coordinator is followed as on plain
PostgreSQL (backfill, an update, a delete, into a family whose tables Citus distributes); a distributed
table is refused in one line, with nothing installed."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import Conflict
from ragstore.search.api import search
from ragstore.sync.sources import add_source, list_sources, remove_source
from ragstore.sync.worker import run_once

pytestmark = [pytest.mark.citus, pytest.mark.slow, pytest.mark.xdist_group("citus")]


def chunk_ids(conn: Any, family: str) -> list[str]:
    rows = conn.execute("SELECT chunk_id FROM ragstore.chunks WHERE family = %s ORDER BY 1", (family,)).fetchall()
    conn.commit()
    return [str(r[0]) for r in rows]


def test_a_local_table_is_followed_and_a_distributed_one_refused(citus_dsn: str) -> None:
    with connect(citus_dsn) as conn:
        conn.execute("DROP TABLE IF EXISTS public.sync_local, public.sync_dist")
        conn.execute("CREATE TABLE public.sync_local (id int PRIMARY KEY, body text)")
        conn.execute("INSERT INTO public.sync_local VALUES (1, 'tar stores archives'), (2, 'gzip compresses')")
        conn.execute("CREATE TABLE public.sync_dist (id int PRIMARY KEY, body text)")
        conn.execute("SELECT create_distributed_table('public.sync_dist', 'id')")
        conn.commit()
        with psycopg.connect(citus_dsn, autocommit=True) as admin:
            admin.execute("DELETE FROM ragstore.families WHERE name = 'synced'")
        families.create_family(conn, "synced", OfflineBackend())
        try:
            with pytest.raises(Conflict) as caught:
                add_source(conn, "synced", "public.sync_dist", id_column="id", text_columns=["body"])
            assert "\n" not in str(caught.value) and "distributed (or reference) table" in str(caught.value)
            assert list_sources(conn) == []
            add_source(conn, "synced", "public.sync_local", id_column="id", text_columns=["body"])
            assert run_once(conn).written == 2
            assert chunk_ids(conn, "synced") == ["sync_local/1", "sync_local/2"]
            conn.execute("UPDATE public.sync_local SET body = 'rsync copies files' WHERE id = 2")
            conn.execute("DELETE FROM public.sync_local WHERE id = 1")
            conn.commit()
            report = run_once(conn)
            assert (report.written, report.deleted, report.failures) == (1, 1, [])
            assert chunk_ids(conn, "synced") == ["sync_local/2"]
            assert search(conn, "synced", "rsync copies files", k=1)[0].chunk_id == "sync_local/2"
            remove_source(conn, "synced", "public.sync_local", delete_chunks=True)
        finally:
            families.drop_family(conn, "synced")
            conn.commit()
