"""``ragstore migrate``: Alembic to head under an advisory lock, its status, and the offline DDL.

The library functions here are what the CLI calls; each one takes a DSN (or None for the default
database, see :func:`ragstore.db.connection.resolve_dsn`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy.exc
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from ragstore.db import citus
from ragstore.db.connection import connect, db_errors, map_db_error, resolve_dsn
from ragstore.db.dialect import dialect_of
from ragstore.db.sqlfiles import query
from ragstore.errors import PermissionDenied, SchemaError

_UPGRADE_LOCK = 0x7261_6773_7570  # "ragsup"


@dataclass(frozen=True)
class MigrationStatus:
    current: str | None
    head: str

    @property
    def up_to_date(self) -> bool:
        return self.current == self.head


@dataclass(frozen=True)
class MigrationResult:
    """What one ``upgrade`` did: the revisions it ran, and the replaceable files (``ragstore/sql/functions/*.sql``,
    ``schema.sql:grants``) it re-applied because their text changed."""

    before: str | None
    after: str
    applied: tuple[str, ...]
    replaced: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.applied or self.replaced)


def migrations_dir() -> Path:
    """The Alembic scripts: shipped inside the wheel, or the repository's ``migrations/`` folder."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_migrations", package.parent / "migrations"):
        if (candidate / "env.py").exists():
            return candidate
    raise SchemaError("the Alembic migrations folder is missing from this installation")


def _config(dsn: str | None, *, stdout: io.StringIO | None = None, upgrading: bool = False) -> Config:
    cfg = Config(stdout=stdout, output_buffer=stdout) if stdout is not None else Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    if dsn is not None:
        cfg.attributes["connection_factory"] = lambda: psycopg.connect(dsn)
    cfg.attributes["upgrading"] = upgrading
    return cfg


def _known(revision: str | None) -> str | None:
    """``revision`` if the scripts know it; None for no revision or one of the chain the baseline replaced
    (env.py bridges those, or refuses them in one line)."""
    if revision is None:
        return None
    script = ScriptDirectory.from_config(_config(None))
    try:
        return revision if script.get_revision(revision) is not None else None
    except Exception:  # alembic.util.CommandError / ResolutionError: an unknown revision
        return None


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config(None)).get_current_head()
    assert head is not None
    return head


def current_revision(dsn: str | None = None) -> str | None:
    """The revision the database is at, or None when ragstore was never migrated there."""
    with connect(dsn, autocommit=True) as conn, db_errors():
        exists = conn.execute("SELECT to_regclass('ragstore.alembic_version') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return None
        row = conn.execute("SELECT version_num FROM ragstore.alembic_version").fetchone()
        return str(row[0]) if row else None


def status(dsn: str | None = None) -> MigrationStatus:
    return MigrationStatus(current=current_revision(dsn), head=head_revision())


def _check_encoding(dsn: str) -> None:
    with connect(dsn, autocommit=True) as conn, db_errors():
        row = conn.execute(
            "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        encoding = str(row[0]) if row else "?"
    if encoding != "UTF8":
        raise SchemaError(
            f"the database encoding is {encoding}; ragstore needs UTF8 "
            "(ragstore.offline_embed reads code points with ascii())"
        )


def _check_may_migrate(dsn: str) -> None:
    """Refuse, in one line, a role that is not the owner side (the app and reader roles never migrate)."""
    with connect(dsn, autocommit=True) as conn, db_errors():
        row = conn.execute(query("roles", "may_migrate")).fetchone()
    if row is not None and not row[1]:
        raise PermissionDenied(
            f"permission denied: role {row[0]!r} may not migrate the ragstore schema; run `ragstore migrate` as "
            "a member of ragstore_owner or a superuser (`ragstore migrate --status` works for every role)"
        )


def _run_alembic(fn: Any, *args: Any) -> None:
    """Run an Alembic command; a database error inside it becomes the mapped one-line ragstore error, and
    env.py's refusal (a database too old to bridge, a schema without a revision) a :class:`SchemaError`."""
    try:
        fn(*args)
    except sqlalchemy.exc.DBAPIError as exc:
        if isinstance(exc.orig, psycopg.Error):
            map_db_error(exc.orig)
        raise
    except RuntimeError as exc:
        raise SchemaError(str(exc)) from exc


def upgrade(dsn: str | None = None, revision: str = "head") -> MigrationResult:
    """Migrate to ``revision`` (head by default). Idempotent: at head it changes nothing.

    Raises :class:`~ragstore.errors.PermissionDenied` for a role that is not the owner side.
    """
    target = resolve_dsn(dsn)
    _check_may_migrate(target)
    _check_encoding(target)
    # Held across read-before, upgrade and read-after, so concurrent callers see each other's work and
    # exactly one of them reports the change. (env.py takes its own lock for plain `alembic upgrade`.)
    with connect(target, autocommit=True) as lock, db_errors():
        lock.execute("SELECT pg_advisory_lock(%s)", (_UPGRADE_LOCK,))
        before = current_revision(target)
        lays_out = dialect_of(lock).lays_out
        if lays_out and citus.any_distributed(lock):
            _check_citus_ready(before, revision)
        cfg = _config(target, upgrading=True)
        _run_alembic(command.upgrade, cfg, revision)
        after = current_revision(target)
        if lays_out:
            # The tables the migrations created are plain tables on the coordinator until laid out.
            citus.distribute(lock)
    assert after is not None
    script = ScriptDirectory.from_config(_config(None))
    applied: list[str] = []
    if before != after:
        for rev in script.iterate_revisions(after, _known(before)):
            applied.append(rev.revision)
    replaced = tuple(cfg.attributes.get("replaced", ()))
    return MigrationResult(before=before, after=after, applied=tuple(reversed(applied)), replaced=replaced)


def _check_citus_ready(before: str | None, revision: str) -> None:
    """Refuse, before any change, pending migrations that cannot run on distributed tables.

    A migration module says so with a ``citus_unsupported`` string (why, and what to do instead).
    """
    script = ScriptDirectory.from_config(_config(None))
    target = script.get_revision(head_revision() if revision == "head" else revision)
    if target is None:
        return
    blocked = [
        f"{rev.revision} ({rev.module.citus_unsupported})"
        for rev in script.iterate_revisions(target.revision, _known(before))
        if getattr(rev.module, "citus_unsupported", None)
    ]
    if blocked:
        raise SchemaError(
            "these migrations cannot run on this Citus cluster's distributed tables, nothing was changed: "
            + "; ".join(blocked)
        )


def downgrade(dsn: str | None = None, revision: str = "base") -> MigrationResult:
    """Migrate down to ``revision``. ``base`` removes every ragstore table (and its data)."""
    target = resolve_dsn(dsn)
    _check_may_migrate(target)
    before = current_revision(target)
    with db_errors():
        _run_alembic(command.downgrade, _config(target), revision)
    after = current_revision(target)
    return MigrationResult(before=before, after=after or "base", applied=())


def offline_sql(revision: str = "head", start: str | None = None, *, on_citus: bool = False) -> str:
    """The DDL that ``upgrade`` would run, without touching any database (for DBAs who apply it by hand).

    From an empty database (no ``start``): ``ragstore/sql/schema.sql`` and the function files, stamped at
    head. From ``start``: the revisions after it, then every function file and the grants (the database's
    record of its files is unknown here, and each replaces itself). ``on_citus`` appends the statements that
    lay the tables out on a Citus coordinator.
    """
    out = io.StringIO()
    rng = f"{start}:{revision}" if start else revision
    command.upgrade(_config(None, stdout=out), rng, sql=True)
    text = out.getvalue()
    return text + "\n" + citus.layout_sql() if on_citus else text
