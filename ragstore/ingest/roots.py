"""Which folder wrote which documents: the source registry of a family (``ragstore.family_sources``).

A folder's documents are named ``<prefix>/<path under the folder>``, the prefix being the folder's name
(``ragstore index --as NAME`` names it otherwise). Two folders of one name would share ids, and a
``--prune`` of one would delete the other's documents; so each prefix of a family belongs to one root (the
folder's resolved absolute path, on one host), recorded by the first run that writes it. A run whose
prefix was last written from another root is refused before it writes anything, unless it takes the
prefix over (``--replace-root``); a run naming one prefix for two roots is refused too. JSONL and
Parquet records carry their own ids and are not registered. See docs/decisions.md.

:func:`check` is the early refusal (before the pass reads the input), :func:`claim` the registration,
after the pass and before the first write, under row locks, so that of two runs of different roots at
once one writes and the other is refused.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from ragstore.db.connection import db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import Conflict, InvalidInput
from ragstore.ingest.readers import Source

Conn = psycopg.Connection[Any]


@dataclass(frozen=True)
class Root:
    """A prefix and the root it stands for in this run."""

    prefix: str
    root: str
    host: str

    def where(self) -> str:
        return self.root if self.host == socket.gethostname() else f"{self.root} on host {self.host}"


@dataclass(frozen=True)
class SourceRow:
    """One row of the registry: the root that last wrote ``prefix`` in ``family``, and when."""

    prefix: str
    root: str
    host: str
    first_written: datetime
    last_written: datetime

    def as_dict(self) -> dict[str, str]:
        return {
            "prefix": self.prefix,
            "root": self.root,
            "host": self.host,
            "first_written": self.first_written.isoformat(),
            "last_written": self.last_written.isoformat(),
        }


def roots_of(sources: Sequence[Source]) -> list[Root]:
    """The prefixes of the folders and documents among ``sources`` with their roots, in prefix order;
    InvalidInput when one prefix stands for two roots in this run."""
    host = socket.gethostname()
    chosen: dict[str, Root] = {}
    for source in sources:
        if source.prefix is None or source.root is None:
            continue
        root = Root(source.prefix, source.root, host)
        other = chosen.setdefault(root.prefix, root)
        if other != root:
            raise InvalidInput(
                f"{source.label}: {other.root} and {root.root} would both be named {root.prefix}/...: "
                "index one of them with --as OTHER (as_= in Store.index_files)"
            )
    return [chosen[prefix] for prefix in sorted(chosen)]


def _refusal(family: str, mine: Root, root: str, host: str) -> Conflict:
    theirs = Root(mine.prefix, root, host)
    return Conflict(
        f"{mine.root}: the documents {mine.prefix}/... of family {family} were last written from "
        f"{theirs.where()}, not from {mine.where()}: index this folder under another name with --as OTHER, or "
        f"take {mine.prefix}/ over with --replace-root (as_=/replace_root=True in Store.index_files)"
    )


def check(conn: Conn, family: str, roots: Sequence[Root], *, replace: bool = False) -> None:
    """Conflict when a prefix of ``roots`` was last written from another root (unless ``replace``)."""
    if not roots or replace:
        return
    with db_errors():
        rows = conn.execute(
            query("sources", "roots_of_prefixes"), {"family": family, "prefixes": [r.prefix for r in roots]}
        ).fetchall()
        conn.commit()
    mine = {r.prefix: r for r in roots}
    for prefix, root, host in rows:
        if (root, host) != (mine[prefix].root, mine[prefix].host):
            raise _refusal(family, mine[prefix], root, host)


def claim(conn: Conn, family: str, roots: Sequence[Root], *, replace: bool = False) -> list[dict[str, str]]:
    """Register ``roots`` as the writers of their prefixes, in one committed transaction, and say for each
    what was done (``registered``: ``new``, ``same`` or ``replaced``); Conflict, with nothing changed,
    when a prefix is another root's and not ``replace``. PermissionDenied for the reader role."""
    if not roots:
        return []
    params: dict[str, Any] = {
        "family": family,
        "prefixes": [r.prefix for r in roots],
        "roots": [r.root for r in roots],
        "hosts": [r.host for r in roots],
    }
    mine = {r.prefix: r for r in roots}
    done: dict[str, str] = {}
    conn.commit()
    with db_errors(), conn.transaction():
        new = {str(p) for (p,) in conn.execute(query("sources", "register_new"), params).fetchall()}
        again = []
        for prefix, root, host in conn.execute(query("sources", "lock_prefixes"), params).fetchall():
            ours = mine[prefix]
            if prefix in new:
                done[prefix] = "new"
            elif (root, host) == (ours.root, ours.host):
                done[prefix] = "same"
                again.append(prefix)
            elif replace:
                conn.execute(
                    query("sources", "take_over"),
                    {"family": family, "prefix": prefix, "root": ours.root, "host": ours.host},
                )
                done[prefix] = "replaced"
            else:
                raise _refusal(family, ours, root, host)
        if again:
            conn.execute(query("sources", "written_again"), {"family": family, "prefixes": again})
    return [
        {"prefix": r.prefix, "root": r.root, "host": r.host, "registered": done.get(r.prefix, "new")} for r in roots
    ]


def list_sources(conn: Conn, family: str) -> list[SourceRow]:
    """The registry rows of ``family``, in prefix order (empty for a family without folder documents)."""
    with db_errors():
        rows = conn.execute(query("sources", "list_sources"), {"family": family}).fetchall()
    return [SourceRow(str(p), str(r), str(h), first, last) for p, r, h, first, last in rows]
