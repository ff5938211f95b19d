"""bm25: full-text postings (ragstore.chunk_terms) kept by triggers, BM25 in the SQL search functions

The SQL lives next to this file, in sql/0012_bm25.sql (sections "upgrade" and "downgrade"); the
downgrade then re-runs 0010's definitions of the functions this revision replaced.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

import re
from pathlib import Path

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql"
# 0010's functions that 0012 replaces: restored from that frozen file on downgrade.
_REPLACED = ("chunks_count_inserted", "chunks_count_deleted", "hybrid_search", "fts_search")


def _section(name: str) -> str:
    text = (_SQL / "0012_bm25.sql").read_text(encoding="utf-8")
    start = text.index(f"-- section: {name}\n")
    end = text.find("-- section: ", start + 1)
    return text[start : end if end >= 0 else len(text)].strip().rstrip(";")


def _definition(text: str, name: str) -> str:
    """The CREATE statement of ragstore.``name`` in ``text`` (as CREATE OR REPLACE) and its COMMENT, if any."""
    start = re.search(r"CREATE (?:OR REPLACE )?" + r"FUNCTION ragstore\." + name + r"\(", text)
    assert start is not None, name
    tag = re.compile(r"\bAS\s+(\$\w*\$)").search(text, start.end())
    assert tag is not None, name
    end = text.index(tag.group(1), tag.end()) + len(tag.group(1))
    body = "CREATE OR REPLACE FUNCTION " + text[start.start() : end].split("FUNCTION ", 1)[1]
    comment = re.search(r"COMMENT ON FUNCTION ragstore\." + name + r"\([^)]*\) IS\s+'(?:[^']|'')*'", text)
    return body + (";\n" + comment.group(0) if comment else "")


def upgrade() -> None:
    op.execute(_section("upgrade"))


def downgrade() -> None:
    op.execute(_section("downgrade"))
    older = (_SQL / "0010_fusion.sql").read_text(encoding="utf-8")
    for name in _REPLACED:
        op.execute(_definition(older, name))
