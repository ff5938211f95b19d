"""The title prefix is a family setting: a family created with it (CLI ``--title-prefix``, Store
``title_prefix=True``) embeds and stores each document chunk with ``Title > Heading`` as its first line;
one without it (the default) stores the section's text alone; a bad recorded value is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragstore import Store, families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources


def guide(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Pear guide\n\n## Install\n\nRun the installer for pears.\n")
    return docs


#: The guide's two sections with their prefix (the title once where the path is the title alone).
HEADED = ["Pear guide\n\n# Pear guide", "Pear guide > Install\n\n## Install\n\nRun the installer for pears."]


def texts(conn: Any, family: str) -> list[str]:
    rows = conn.execute("SELECT text FROM ragstore.chunks WHERE family = %s ", (family,))
    return sorted(row[0] for row in rows.fetchall())


def test_a_family_created_with_title_prefix_stores_chunks_headed_by_title_and_path(
    dsn: str, conn: Any, tmp_path: Path
) -> None:
    runner = CliRunner()
    made = runner.invoke(cli, ["--dsn", dsn, "family", "create", "headed", "--backend", "offline", "--title-prefix"])
    assert made.exit_code == 0, made.output
    plain = runner.invoke(cli, ["--dsn", dsn, "family", "create", "plain", "--backend", "offline"])
    assert plain.exit_code == 0, plain.output
    docs = guide(tmp_path)
    for family in ("headed", "plain"):
        run = runner.invoke(cli, ["--dsn", dsn, "index", family, str(docs)])
        assert run.exit_code == 0, run.output
    assert families.get_family(conn, "headed").options["title_prefix"] is True
    assert "title_prefix" not in families.get_family(conn, "plain").options
    assert texts(conn, "headed") == HEADED
    assert texts(conn, "plain") == ["# Pear guide", "## Install\n\nRun the installer for pears."]


def test_store_title_prefix_is_recorded_and_a_bad_value_is_refused(dsn: str, conn: Any, tmp_path: Path) -> None:
    with Store(dsn, pool_size=1) as store:
        store.create_family("headed", "offline", title_prefix=True)
        store.index_files([guide(tmp_path)], "headed")
    assert texts(conn, "headed") == HEADED
    with pytest.raises(InvalidInput, match="title_prefix must be true or false"):
        families.create_family(conn, "bad", OfflineBackend(), options={"title_prefix": "yes"})
    conn.execute("UPDATE ragstore.families SET options = '{\"title_prefix\": 1}' WHERE name = 'headed'")
    with pytest.raises(InvalidInput, match="invalid title_prefix option 1"):
        index_sources(conn, "headed", open_sources([str(tmp_path / "docs")]))
