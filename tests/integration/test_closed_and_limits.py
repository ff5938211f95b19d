"""Decided limits: check-recall's k as every search's; a closed Store or AsyncStore says so; the local
cluster's layout file is private."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragstore import AsyncStore, Store, families
from ragstore.cli.main import cli
from ragstore.db.cluster import LocalCluster
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import DatabaseUnavailable
from tests.toolkit.roles import app_dsn  # noqa: F401  (fixture)


@pytest.mark.parametrize("k", ["1001", "99999999999"])
def test_check_recall_refuses_k_over_the_search_limit_in_one_line(dsn: str, conn: Any, k: str) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    conn.commit()
    result = CliRunner().invoke(cli, ["--dsn", dsn, "check-recall", "docs", "-k", k])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert lines == [f"error: k must be at most 1000 (a search returns at most 1000 hits), got {k}"]


def test_a_closed_store_says_it_is_closed(
    dsn: str,
    conn: Any,
    app_dsn: str,  # noqa: F811
) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    conn.commit()
    store = Store(app_dsn)
    store.index([{"chunk_id": "a", "package_path": "p", "text": "hello"}], "docs")
    store.close()
    calls = (
        lambda: store.search("docs", "hello"),
        lambda: store.index([{"chunk_id": "b", "package_path": "p", "text": "there"}], "docs"),
        lambda: store.families(),
        lambda: store.migrate(),
    )
    for call in calls:
        with pytest.raises(DatabaseUnavailable, match=r"^the Store is closed \(close\(\) was called"):
            call()
    store.close()  # still idempotent


def test_a_closed_async_store_says_it_is_closed(dsn: str, conn: Any) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    conn.commit()

    async def main() -> None:
        async with AsyncStore(dsn) as store:
            assert await store.search("docs", "hello") == []
        for call in (lambda: store.search("docs", "hello"), lambda: store.families(), lambda: store.family("docs")):
            with pytest.raises(DatabaseUnavailable, match=r"^the AsyncStore is closed"):
                await call()

    asyncio.run(main())


def test_the_cluster_layout_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    os.umask(0o022)
    cluster = LocalCluster(tmp_path)
    cluster._create_layout(2)
    assert stat.S_IMODE(cluster.layout_file.stat().st_mode) == 0o600
    assert [n.port for n in cluster.nodes()] == list(json.loads(cluster.layout_file.read_text())["ports"].values())
    cluster.layout_file.chmod(0o644)  # written by an earlier version: made private at its next read
    cluster.nodes()
    assert stat.S_IMODE(cluster.layout_file.stat().st_mode) == 0o600
