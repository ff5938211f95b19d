"""``ragstore token``: the bearer tokens of ``ragstore serve`` (ragstore/serve/tokens.py)."""

from __future__ import annotations

import click

from ragstore.cli.main import app, emit_json, terminal_safe


@click.group("token")
def token_group() -> None:
    """Bearer tokens of `ragstore serve`, each mapped to a database role (owner role only)."""


@token_group.command("create")
@click.option(
    "--role",
    required=True,
    help="The database role requests with this token run as: ragstore_reader, ragstore_app, ragstore_owner, "
    "or a role that is a member of one of them (an agent's role, for its memory).",
)
@click.option("--name", default=None, help="A name to list and revoke it by (default: the role's name).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def token_create(ctx: click.Context, role: str, name: str | None, as_json: bool) -> None:
    """Make a token for ROLE and print it, once: only its SHA-256 is kept."""
    with app(ctx).store() as store:
        new = store.create_token(role, name)
    if as_json:
        emit_json({"id": new.id, "name": new.name, "role": new.role, "token": new.token})
        return
    click.echo(new.token)
    click.echo(
        terminal_safe(f"token {new.name} (id {new.id}) acts as role {new.role}; it is shown only this once"), err=True
    )


@token_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def token_list(ctx: click.Context, as_json: bool) -> None:
    """List the tokens (id, name, role, created, last used, revoked); never a secret."""
    with app(ctx).store() as store:
        rows = store.tokens()
    if as_json:
        emit_json([row.as_dict() for row in rows])
        return
    for row in rows:
        used = row.last_used_at.isoformat(timespec="seconds") if row.last_used_at else "never used"
        state = f"revoked {row.revoked_at.isoformat(timespec='seconds')}" if row.revoked_at else "live"
        click.echo(
            terminal_safe(
                f"{row.id}\t{row.name}\t{row.role}\t{row.created_at.isoformat(timespec='seconds')}\t{used}\t{state}"
            )
        )


@token_group.command("revoke")
@click.argument("name_or_id")
@click.pass_context
def token_revoke(ctx: click.Context, name_or_id: str) -> None:
    """Revoke the live token NAME_OR_ID: the server refuses it (401) from its next request on."""
    with app(ctx).store() as store:
        row = store.revoke_token(name_or_id)
    click.echo(terminal_safe(f"revoked token {row.name} (id {row.id})"))
