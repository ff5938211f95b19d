"""Agent memory in Postgres: writing records, the store reader, composition from the database, erasure.

Who may read or append an agent's memory is decided by the database, not by this module: row-level
security on ``ragstore.memory`` shows a role only the agents bound to it in
``ragstore.agent_principals`` (the owner side and superusers see all; see :mod:`ragstore.memory.principals`).
The SQL here also names the agent in every WHERE clause, so a connection that sees every agent (the
embedded server's superuser) is isolated per agent the same way. The table is append-only:
:func:`add_records` inserts and never overwrites, and :func:`forget` — the owner's — is the one logged
way to erase a record.

Errors: :class:`~ragstore.errors.InvalidInput` for a record that fails validation (the message names
the file, line and field), :class:`~ragstore.errors.Conflict` when an id exists with another body,
:class:`~ragstore.errors.PermissionDenied` when the role may not write that agent's memory,
:class:`~ragstore.errors.NotFound` when :func:`forget` finds no such record, and the mapped database
errors of :func:`ragstore.db.connection.map_db_error`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from pydantic import ValidationError

from ragstore.common.jsonl import read_objects
from ragstore.common.like import like_contains
from ragstore.common.problems import first_problem
from ragstore.db.connection import Conn, db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from ragstore.memory.binding import Binding, ReadRequest, bind
from ragstore.memory.bundle import Bundle, JsonForm, canonical_bytes, format_at, record_to_dict
from ragstore.memory.compose import compose_memory
from ragstore.memory.models import (
    DEFAULT_POLICY,
    AgentProfile,
    CompositionPolicy,
    MemoryRecord,
    Store,
    load_profile,
)

__all__ = [
    "AddResult",
    "ForgetResult",
    "PostgresReader",
    "add_records",
    "agent_scope",
    "compose_from_db",
    "forget",
    "import_jsonl",
    "make_record",
    "memory_layers",
    "postgres_binding",
    "read_jsonl",
    "record_id_for",
]

_BATCH = 1000
_MIN_PAGE = 64


@contextlib.contextmanager
def agent_scope(conn: Conn, agent: str) -> Iterator[None]:
    """A transaction (a savepoint inside an open one) for one agent's reads and writes.

    Nothing is set for the agent: the database decides from the session's role which agents it sees
    (``ragstore.agent_principals``), and the SQL names ``agent``. psycopg errors inside are mapped.
    """
    del agent  # named by every statement inside; kept in the signature for the callers' clarity
    with db_errors(), conn.transaction():
        yield


@dataclass(frozen=True, slots=True)
class AddResult:
    """``added`` records were new; ``existing`` were already stored with the same body (a no-op)."""

    added: int
    existing: int


def record_id_for(agent: str, store: str, at: datetime, content: str) -> str:
    """A content-addressed id: ``m-`` and 24 hex digits of SHA-256 over agent, store, ``at`` and content."""
    key = canonical_bytes({"agent": agent, "store": store, "at": format_at(at), "content": content})
    return "m-" + hashlib.sha256(key).hexdigest()[:24]


def make_record(fields: dict[str, Any], where: str = "record", *, now: datetime | None = None) -> MemoryRecord:
    """Validate ``fields`` into a :class:`MemoryRecord`; a missing ``id`` becomes :func:`record_id_for`.

    A missing (or null) ``at`` becomes ``now`` (default: the current time, UTC), as ``memory add`` does.
    Raises :class:`~ragstore.errors.InvalidInput` ``"<where>: field '<name>': <problem>"``.
    """
    if fields.get("at") is None:
        fields = {**fields, "at": now if now is not None else datetime.now(UTC)}
    try:
        generated = fields.get("id") is None
        record = MemoryRecord.model_validate({**fields, "id": "pending" if generated else fields["id"]})
    except ValidationError as exc:
        problem = first_problem(exc, "(record)")
        raise InvalidInput(f"{where}: field '{problem.field}': {problem.reason}") from exc
    if not generated:
        return record
    new_id = record_id_for(record.agent, record.store.value, record.at, record.content)
    return record.model_copy(update={"id": new_id})


def read_jsonl(path: str | Path) -> list[MemoryRecord]:
    """Read and validate a JSONL file of records (blank lines skipped), before anything is written.

    A line without ``at`` gets the time of the import (one instant for the whole file), as ``memory add``
    does. Raises :class:`~ragstore.errors.NotFound` for a missing file and
    :class:`~ragstore.errors.InvalidInput` ``"FILE:LINE: ..."`` for bad JSON, a line that is not an
    object, a field that fails validation, or an id repeated with another body inside the file.
    """
    return _read_jsonl(path)[0]


def _read_jsonl(path: str | Path) -> tuple[list[MemoryRecord], set[tuple[str, str]]]:
    """:func:`read_jsonl`, and the (agent, id) keys of the records whose ``at`` the file did not give."""
    now = datetime.now(UTC)
    undated: set[tuple[str, str]] = set()
    records: list[MemoryRecord] = []
    seen: dict[tuple[str, str], tuple[int, MemoryRecord]] = {}
    for (where, number, _text), data in read_objects(path):
        record = make_record(data, where, now=now)
        key = (record.agent, record.id)
        if data.get("at") is None and data.get("id") is not None:
            undated.add(key)
        if key in seen:
            if seen[key][1] != record:
                raise InvalidInput(f"{where}: id {record.id!r} repeats line {seen[key][0]} with another body")
            continue
        seen[key] = (number, record)
        records.append(record)
    return records, undated


def add_records(conn: Conn, records: Iterable[MemoryRecord], *, undated: Collection[tuple[str, str]] = ()) -> AddResult:
    """Insert ``records`` in one transaction, idempotent by (agent, id).

    A record whose id the agent already has is skipped when its stored body is equal, and the whole
    call is refused with :class:`~ragstore.errors.Conflict` (nothing written) when it differs — memory
    is append-only, so an id never changes meaning. ``undated`` names the (agent, id) records whose
    ``at`` was filled in with "now" rather than given: for those the stored ``at`` stands, so running
    the same ``memory add --id`` again is a no-op. Raises :class:`~ragstore.errors.PermissionDenied`
    (nothing written) when the session's role may not write an agent's memory. Commits when it opened
    the transaction.
    """
    by_agent: dict[str, dict[str, MemoryRecord]] = {}
    for record in records:
        mine = by_agent.setdefault(record.agent, {})
        if record.id in mine and mine[record.id] != record:
            raise Conflict(f"record {record.id!r} of agent {record.agent!r} given twice with different bodies")
        mine[record.id] = record
    added = existing = 0
    with db_errors(), conn.transaction():
        for agent in sorted(by_agent):
            try:
                with agent_scope(conn, agent):
                    group = [by_agent[agent][key] for key in sorted(by_agent[agent])]
                    for start in range(0, len(group), _BATCH):
                        batch = group[start : start + _BATCH]
                        new = _insert_batch(conn, batch)
                        added += len(new)
                        old = [r for r in batch if r.id not in new]
                        existing += _check_existing(conn, agent, old, undated)
            except PermissionDenied as exc:
                raise PermissionDenied(
                    f"permission denied: {_who(conn)} may not write the memory of agent {agent!r} "
                    f"(the owner binds roles to agents: ragstore memory grant --agent {agent} --role ROLE)"
                ) from exc
    return AddResult(added=added, existing=existing)


def _who(conn: Conn) -> str:
    """``role 'x'`` (``as 'y'`` when the login role differs), for permission messages; never raises."""
    try:
        with conn.transaction():
            row = conn.execute(query("memory", "acting_roles")).fetchone()
    except psycopg.Error:
        return "this role"
    if row is None:
        return "this role"
    current, login = row
    return f"role {current!r}" if current == login else f"role {login!r} (as {current!r})"


def import_jsonl(conn: Conn, path: str | Path) -> AddResult:
    """Validate every line of ``path`` (:func:`read_jsonl`), then :func:`add_records` them in one transaction.

    A line with an ``id`` and no ``at`` is a no-op when that record is stored already (its stored ``at``
    stands), so importing the same file again adds nothing.
    """
    records, undated = _read_jsonl(path)
    return add_records(conn, records, undated=undated)


def _insert_batch(conn: Conn, batch: Sequence[MemoryRecord]) -> set[str]:
    payload = json.dumps([record_to_dict(r) for r in batch], ensure_ascii=False, allow_nan=False)
    rows = conn.execute(query("memory", "insert_records"), {"records": payload}).fetchall()
    return {str(row[0]) for row in rows}


def _check_existing(
    conn: Conn, agent: str, records: Sequence[MemoryRecord], undated: Collection[tuple[str, str]]
) -> int:
    if not records:
        return 0
    rows = conn.execute(query("memory", "records_by_id"), {"agent": agent, "ids": [r.id for r in records]}).fetchall()
    stored = {row[1]: _row_record(row) for row in rows}
    for record in records:
        old = stored.get(record.id)
        if old is None:  # hidden by row-level security or erased meanwhile: never overwrite blindly
            raise Conflict(f"record {record.id!r} of agent {agent!r} exists but cannot be read back")
        if (agent, record.id) in undated:
            record = record.model_copy(update={"at": old.at})
        if old != record:
            raise Conflict(
                f"record {record.id!r} of agent {agent!r} already exists with another body "
                f"(store {old.store.value}, at {format_at(old.at)}); memory is append-only: use a new id"
            )
    return len(records)


def _row_record(row: Sequence[Any]) -> MemoryRecord:
    agent, id_, store, at, content, salience, confidence, tags, metadata = row
    return MemoryRecord(
        id=id_,
        agent=agent,
        store=Store(store),
        at=at,
        content=content,
        salience=salience,
        confidence=confidence,
        tags=tuple(tags),
        metadata=metadata,
    )


@dataclass(frozen=True, slots=True)
class PostgresReader:
    """The :class:`~ragstore.memory.binding.Reader` of one store of one agent, over ``ragstore.memory``.

    Pushes the floors, ``not_after``, the order (``at DESC, id`` in code-point order) and the cap into
    SQL (served by ``memory_read_idx``). The task hint is matched exactly as the composer matches it
    (casefolded, in Python); SQL only pre-filters with an ASCII ``LIKE`` that never drops a match, and
    the reader pages on until it has ``limit`` matches or the store is exhausted — so ``LIMIT`` can
    never cut a match that a looser or stricter SQL filter would have mis-ranked. Raises
    :class:`~ragstore.errors.InvalidInput` when asked for another store or agent than it was bound to,
    and mapped database errors (the composer reports them as the store's failure).
    """

    conn: Conn
    store: Store
    agent: str

    def read(self, request: ReadRequest) -> list[MemoryRecord]:
        """The first ``request.limit`` records of this store passing the request, in composition order."""
        if request.store != self.store or request.agent != self.agent:
            raise InvalidInput(
                f"reader of {self.agent}/{self.store.value} asked for {request.agent}/{request.store.value}"
            )
        if request.limit <= 0:
            return []
        hint = request.task_hint.strip().casefold() if request.task_hint and request.task_hint.strip() else None
        params: dict[str, Any] = {
            "agent": self.agent,
            "store": self.store.value,
            "not_after": request.not_after,
            "min_salience": request.min_salience,
            "min_confidence": request.min_confidence,
            "pattern": like_contains(hint) if hint is not None and hint.isascii() else None,
            "after_at": None,
            "after_id": None,
            "limit": request.limit if hint is None else max(request.limit, _MIN_PAGE),
        }
        found: list[MemoryRecord] = []
        with agent_scope(self.conn, self.agent):
            while True:
                rows = self.conn.execute(query("memory", "read_store"), params).fetchall()
                for row in rows:
                    record = _row_record((self.agent, row[0], self.store.value, *row[1:]))
                    if hint is None or hint in record.content.casefold():
                        found.append(record)
                if len(found) >= request.limit or len(rows) < params["limit"]:
                    return found[: request.limit]
                params.update(not_after=rows[-1][1], after_at=rows[-1][1], after_id=rows[-1][0])


def postgres_binding(conn: Conn, profile: AgentProfile) -> Binding:
    """Bind ``profile``'s declared stores — and only those — to :class:`PostgresReader`s over ``conn``."""
    return bind(profile, lambda store, agent: PostgresReader(conn, store, agent))


def compose_from_db(
    conn: Conn,
    profile: AgentProfile,
    *,
    now: datetime,
    task_hint: str | None = None,
    policy: CompositionPolicy = DEFAULT_POLICY,
) -> Bundle:
    """:func:`~ragstore.memory.compose.compose_memory` over the stored records of ``profile``.

    Never raises because of the database: a store whose read fails is empty and listed in
    ``Bundle.failures``. Raises :class:`~ragstore.errors.InvalidInput` only for a naive ``now``.
    """
    return compose_memory(postgres_binding(conn, profile), now=now, task_hint=task_hint, policy=policy)


@dataclass(frozen=True, slots=True)
class ForgetResult(JsonForm):
    """The erasure-log row of one :func:`forget`: which record, why, by whom and when (never the content)."""

    log_id: int
    agent: str
    store: str
    record_id: str
    reason: str
    forgotten_by: str
    acting_role: str
    forgotten_at: datetime


def forget(conn: Conn, agent: str, record_id: str, reason: str) -> ForgetResult:
    """Erase one record (and its recall embeddings) through ``ragstore.memory_forget``, and log it.

    The owner's path for legal erasure: only ``ragstore_owner`` (its members) and superusers may run it;
    the log row records the login role (``session_user``) and the acting role (``current_user``), taken
    by the database. Raises :class:`~ragstore.errors.InvalidInput` for a blank reason,
    :class:`~ragstore.errors.PermissionDenied` for any other role, :class:`~ragstore.errors.NotFound`
    when the agent has no such record, and the mapped database error otherwise. Commits when it opened
    the transaction.
    """
    if not reason.strip():
        raise InvalidInput("forget needs a non-blank --reason (it is logged)")
    with db_errors(), conn.transaction():
        row = conn.execute(query("memory", "forget"), {"agent": agent, "id": record_id, "reason": reason}).fetchone()
    if row is None:
        raise NotFound(f"agent {agent!r} has no memory record {record_id!r}")
    return ForgetResult(*row)


def memory_layers(
    conn: Conn, profile_path: str | Path | AgentProfile, task_hint: str | None, now: datetime
) -> tuple[list[str], dict[str, Any]]:
    """The composed memory of the agent in ``profile_path`` (a profile file, or the profile itself) as
    context-pack layers: ``(L4, L5)``.

    L4 gets one line per kept record, store by store in canonical order, newest first:
    ``"memory/<store> <at> [<id>] <content>"``. L5 gets ``{"memory": {...}}`` with the agent, the
    bundle id (SHA-256 of the bundle's canonical JSON), the kept ids per declared store and any read
    failures — so a pack says which memory it was built from. Deterministic for the same records.
    Raises what :func:`~ragstore.memory.models.load_profile` raises (NotFound, InvalidInput) and
    InvalidInput for a naive ``now``; a failing store is reported in L5, not raised.
    """
    profile = profile_path if isinstance(profile_path, AgentProfile) else load_profile(profile_path)
    bundle = compose_from_db(conn, profile, now=now, task_hint=task_hint)
    summaries = [
        f"memory/{record.store.value} {format_at(record.at)} [{record.id}] {record.content.strip()}"
        for record in bundle.all_records()
    ]
    state: dict[str, Any] = {
        "memory": {
            "agent": bundle.agent,
            "bundle_id": bundle.bundle_id,
            "task_hint": task_hint.strip() if task_hint and task_hint.strip() else None,
            "stores": {store.value: [r.id for r in records] for store, records in bundle.records.items()},
            "failures": [failure.to_dict() for failure in bundle.failures],
        }
    }
    return summaries, state
