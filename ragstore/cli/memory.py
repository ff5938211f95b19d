"""``ragstore memory add|import|compose|recall|forget|grant|revoke|principals``: agent memory.

Each command parses its options, calls one library function of :mod:`ragstore.memory` and prints.
Errors are :class:`~ragstore.errors.RagstoreError` and reach the main group, which prints one line.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ragstore.cli.main import CliError, app, emit_json, terminal_safe
from ragstore.common.moments import check_aware
from ragstore.families import BACKENDS, make_backend
from ragstore.memory.models import ALL_STORES, load_profile
from ragstore.memory.store import make_record

if TYPE_CHECKING:
    from ragstore.store import Memory

__all__ = ["memory_group"]

_STORES = [store.value for store in ALL_STORES]


def _now(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise CliError(f"--now {value!r} is not an ISO 8601 timestamp") from exc
    return check_aware(f"--now {value!r}", parsed)


@click.group("memory")
def memory_group() -> None:
    """Agent memory: five append-only stores, composition by recency, recall by meaning."""


@memory_group.command("add")
@click.option("--agent", required=True, help="The memory agent id.")
@click.option("--store", required=True, type=click.Choice(_STORES))
@click.option("--content", required=True, help="The record's text (non-blank).")
@click.option("--salience", type=float, default=None, help="0..1 (default 0.5).")
@click.option("--confidence", type=float, default=None, help="0..1 (default 0.5).")
@click.option("--tags", default=None, help="Comma-separated tags, e.g. a,b.")
@click.option("--at", "at", default=None, help="ISO 8601 with timezone (default: now).")
@click.option(
    "--id",
    "record_id",
    default=None,
    help="Record id: running the same add again is then a no-op (default: derived from agent, store, at, content).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def memory_add(ctx: click.Context, /, **opts: Any) -> None:
    """Append one record; adding the same --id with the same body again is a no-op (another body: an error)."""
    fields: dict[str, Any] = {
        "agent": opts["agent"],
        "store": opts["store"],
        "content": opts["content"],
        "at": opts["at"] if opts["at"] is not None else datetime.now(UTC),
    }
    for name in ("salience", "confidence"):
        if opts[name] is not None:
            fields[name] = opts[name]
    if opts["tags"]:
        fields["tags"] = [tag.strip() for tag in opts["tags"].split(",") if tag.strip()]
    if opts["record_id"] is not None:
        fields["id"] = opts["record_id"]
    record = make_record(fields, "memory add")
    # Without --at the time is "now": for a given --id the stored time stands, so a rerun is a no-op.
    undated = {(record.agent, record.id)} if opts["at"] is None and opts["record_id"] is not None else set()
    with app(ctx).store() as store:
        result = store.memory.add([record], undated=undated)
    if opts["as_json"]:
        emit_json({"id": record.id, "agent": record.agent, "added": result.added, "existing": result.existing})
    else:
        verb = "added" if result.added else "already stored"
        click.echo(f"{verb} {record.agent}/{record.store.value} {record.id}")


@memory_group.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def memory_import(ctx: click.Context, file: Path, as_json: bool) -> None:
    """Append the records of FILE (JSONL, one record per line) in one transaction, idempotent by id."""
    with app(ctx).store() as store:
        result = store.memory.import_file(file)
    if as_json:
        emit_json({"file": str(file), "added": result.added, "existing": result.existing})
    else:
        click.echo(f"{file}: {result.added} added, {result.existing} already stored")


@memory_group.command("compose")
@click.option("--profile", "profile_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--task-hint", default=None, help="Keep semantic/procedural records containing this text.")
@click.option("--now", "now", default=None, help="Compose as of this ISO timestamp (default: now).")
@click.option("--json", "as_json", is_flag=True, help="Canonical JSON (same as --format json).")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown", show_default=True)
@click.pass_context
def memory_compose(
    ctx: click.Context, profile_path: Path, task_hint: str | None, now: str | None, as_json: bool, fmt: str
) -> None:
    """Compose the agent's memory: per declared store, floors, caps, newest first (byte-stable)."""
    when = _now(now)
    profile = load_profile(profile_path)
    with app(ctx).store() as store:
        bundle = store.memory.compose(profile, now=when, task_hint=task_hint)
    if as_json or fmt == "json":
        click.echo(bundle.to_json().decode("utf-8"))
    else:
        click.echo(bundle.to_markdown(), nl=False)
    for failure in bundle.failures:
        click.echo(f"warning: store {failure.store.value} unavailable: {failure.error}: {failure.message}", err=True)


@memory_group.command("recall")
@click.option("--profile", "profile_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--backend", "backend_name", type=click.Choice(BACKENDS), default="offline", show_default=True)
@click.option("--model", default=None, help="Model name (for --backend openai).")
@click.option("--now", "now", default=None, help="Recall as of this ISO timestamp (default: now).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def memory_recall(ctx: click.Context, /, **opts: Any) -> None:
    """The K records of the declared stores most relevant to QUERY (blended semantic/lexical/temporal)."""
    when = _now(opts["now"])
    profile = load_profile(opts["profile_path"])
    backend = make_backend(opts["backend_name"], model=opts["model"])
    with app(ctx).store() as store:
        result = store.memory.recall(profile, opts["query"], opts["k"], now=when, backend=backend)
    if opts["as_json"]:
        emit_json(result.to_dict())
        return
    for hit in result.hits:
        record = hit.record
        first = record.content.strip().splitlines()[0]
        click.echo(terminal_safe(f"{hit.score:.4f}  {record.store.value:<10} [{record.id}] {first}"))
    if not result.hits:
        click.echo("no records in the declared stores")
    if result.pending:
        click.echo(f"note: {result.embedded} records embedded now; more remain (run recall again)", err=True)


@memory_group.command("forget")
@click.option("--agent", required=True)
@click.option("--id", "record_id", required=True)
@click.option("--reason", required=True, help="Why (logged in ragstore.memory_forget_log; the content is not).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def memory_forget(ctx: click.Context, agent: str, record_id: str, reason: str, as_json: bool) -> None:
    """Erase one record for legal reasons (ragstore_owner only): the one exception to append-only, logged."""
    with app(ctx).store() as store:
        result = store.memory.forget(agent, record_id, reason)
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(
            f"forgot {result.agent}/{result.store} {result.record_id} (log {result.log_id}, by {result.acting_role})"
        )


def _binding_command(
    name: str, summary: str, role_help: str, change: Callable[[Memory, str, str], str]
) -> click.Command:
    """``memory NAME --agent A --role R``: ``change`` the binding of A to R, then print what it says."""

    @memory_group.command(name, help=summary)
    @click.option("--agent", required=True, help="The memory agent id.")
    @click.option("--role", "role", required=True, help=role_help)
    @click.pass_context
    def command(ctx: click.Context, agent: str, role: str) -> None:
        with app(ctx).store() as store:
            said = change(store.memory, agent, role)
        click.echo(said)

    return command


def _grant(memory: Memory, agent: str, role: str) -> str:
    added = memory.grant(agent, role)
    return f"{'granted' if added else 'already granted'}: role {role} acts for agent {agent}"


def _revoke(memory: Memory, agent: str, role: str) -> str:
    memory.revoke(agent, role)
    return f"revoked: role {role} no longer acts for agent {agent}"


memory_grant = _binding_command(
    "grant",
    "Bind AGENT to a database ROLE: that role reads and appends the agent's memory (owner only).",
    "The database role that acts for it (its members too).",
    _grant,
)
memory_revoke = _binding_command(
    "revoke", "Remove the binding of AGENT to ROLE (owner only).", "The database role bound to it.", _revoke
)


@memory_group.command("principals")
@click.option("--agent", default=None, help="Only this agent's bindings.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def memory_principals(ctx: click.Context, agent: str | None, as_json: bool) -> None:
    """List which database roles act for which agents."""
    with app(ctx).store() as store:
        bindings = store.memory.principals(agent)
    if as_json:
        emit_json([p.to_dict() for p in bindings])
        return
    for p in bindings:
        missing = "" if p.role_exists else "  (role does not exist: grants nothing)"
        click.echo(f"{p.agent}\t{p.role}\tby {p.granted_by} at {p.to_dict()['granted_at']}{missing}")
    if not bindings:
        click.echo("no agent is bound to a role")
