"""Reading the frozen SQL files of the migrations (``migrations/versions/sql/NNNN_name.sql``).

A revision's file never changes once released; a migration module reads its statements from it with
:func:`section` (the text after ``-- section: <name>`` up to the next section) and, to restore an older
revision's function on downgrade, :func:`function_definition`.
"""

from __future__ import annotations

import re
from pathlib import Path


def section(path: Path, name: str) -> str:
    """The statements of section ``name`` of the frozen file ``path``, without a trailing semicolon."""
    text = path.read_text(encoding="utf-8")
    start = text.index(f"-- section: {name}\n")
    end = text.find("-- section: ", start + 1)
    return text[start : end if end >= 0 else len(text)].strip().rstrip(";")


def function_definition(text: str, name: str) -> str:
    """The CREATE statement of ragstore.``name`` in ``text`` (as CREATE OR REPLACE) and its COMMENT, if any."""
    start = re.search(r"CREATE (?:OR REPLACE )?" + r"FUNCTION ragstore\." + name + r"\(", text)
    assert start is not None, name
    tag = re.compile(r"\bAS\s+(\$\w*\$)").search(text, start.end())
    assert tag is not None, name
    end = text.index(tag.group(1), tag.end()) + len(tag.group(1))
    body = "CREATE OR REPLACE FUNCTION " + text[start.start() : end].split("FUNCTION ", 1)[1]
    comment = re.search(r"COMMENT ON FUNCTION ragstore\." + name + r"\([^)]*\) IS\s+'(?:[^']|'')*'", text)
    return body + (";\n" + comment.group(0) if comment else "")
