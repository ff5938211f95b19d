"""``ragstore delete|get|list|export FAMILY``: what a family holds, chunk by chunk."""

from __future__ import annotations

import json
import sys

import click

from ragstore.cli.main import CliError, app, emit_json, terminal_safe
from ragstore.families import chunks


@click.command("delete")
@click.argument("family")
@click.option("--id", "ids", multiple=True, help="A chunk id to delete (repeat for more).")
@click.option(
    "--package",
    "packages",
    multiple=True,
    help="Delete every chunk whose package_path starts with this prefix, as --package in search (repeat for more).",
)
@click.option("--dry-run", is_flag=True, help="Say what would be deleted, per package, and delete nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def delete_command(
    ctx: click.Context, family: str, ids: tuple[str, ...], packages: tuple[str, ...], dry_run: bool, as_json: bool
) -> None:
    """Delete chunks of FAMILY by id (--id) or by package_path prefix (--package); other families are untouched."""
    if not ids and not packages:
        raise CliError("say what to delete: --id ID or --package PREFIX (see `ragstore list FAMILY`)")
    with app(ctx).store() as store:
        report = store.delete(family, ids=ids, packages=packages, dry_run=dry_run)
    if as_json:
        emit_json(report.as_dict())
        return
    click.echo(terminal_safe(report.summary()))
    if dry_run:
        for package, count in sorted(report.packages.items()):
            click.echo(terminal_safe(f"  {package}: {count}"))
    for chunk_id in report.missing:
        click.echo(terminal_safe(f"not found: {chunk_id}"))


@click.command("get")
@click.argument("family")
@click.argument("ids", nargs=-1, required=True)
@click.option("--vectors", is_flag=True, help="Include each chunk's vector and model.")
@click.option("--json", "as_json", is_flag=True, help="Print the chunks as JSON.")
@click.pass_context
def get_command(ctx: click.Context, family: str, ids: tuple[str, ...], vectors: bool, as_json: bool) -> None:
    """Print the chunks of FAMILY with these IDS (text and metadata); exit 1 when some are not found."""
    with app(ctx).store() as store:
        result = store.get(family, ids, vectors=vectors)
    if as_json:
        emit_json({"family": result.family, "chunks": [c.as_dict() for c in result.chunks], "missing": result.missing})
    else:
        for chunk in result.chunks:
            click.echo(terminal_safe(f"[{chunk.package_path}#{chunk.chunk_id}]"))
            if chunk.metadata:
                shown = json.dumps(chunk.metadata, ensure_ascii=False, sort_keys=True)
                click.echo(terminal_safe(f"metadata: {shown}"))
            if chunk.vector is not None:
                click.echo(terminal_safe(f"vector: {chunk.model}, {len(chunk.vector)} dimensions"))
            click.echo("\n".join(terminal_safe(line) for line in chunk.text.split("\n")))
            click.echo()
        for chunk_id in result.missing:
            click.echo(terminal_safe(f"not found: {chunk_id}"), err=True)
    if result.missing:
        sys.exit(1)


@click.command("list")
@click.argument("family")
@click.option("--package", default=None, help="Only chunks whose package_path starts with this prefix.")
@click.option(
    "--limit", type=click.IntRange(1, chunks.MAX_LIST_LIMIT), default=100, show_default=True, help="Chunks per page."
)
@click.option("--after", default=None, help="Start after this chunk id (the `next` of the page before).")
@click.option("--json", "as_json", is_flag=True, help="Print the page as JSON.")
@click.pass_context
def list_command(
    ctx: click.Context, family: str, package: str | None, limit: int, after: str | None, as_json: bool
) -> None:
    """List the chunk ids of FAMILY in (package_path, chunk_id) order, a page at a time, with the counts."""
    with app(ctx).store() as store:
        page = store.list_chunks(family, package=package, limit=limit, after=after)
    if as_json:
        emit_json(page.as_dict())
        return
    for item in page.chunks:
        click.echo(f"{terminal_safe(item.package_path)}\t{terminal_safe(item.chunk_id)}")
    line = f"{len(page.chunks)} of {page.total} chunks in {page.packages} packages"
    if page.next is not None:
        line += f"; next page: --after {page.next}"
    click.echo(terminal_safe(line), err=True)


@click.command("export")
@click.argument("family")
@click.option("--format", "format_", type=click.Choice(chunks.EXPORT_FORMATS), default="jsonl", show_default=True)
@click.option("--output", "-o", default="-", show_default=True, help="The file to write (- for stdout).")
@click.option("--package", default=None, help="Only chunks whose package_path starts with this prefix.")
@click.option("--vectors", is_flag=True, help="Include each chunk's vector and model (to re-index without embedding).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (with --output FILE).")
@click.pass_context
def export_command(
    ctx: click.Context, family: str, format_: str, output: str, package: str | None, vectors: bool, as_json: bool
) -> None:
    """Write FAMILY's chunks as JSONL or Parquet records that `ragstore index` reads back to the same chunks."""
    with app(ctx).store() as store:
        if output == "-":
            if format_ == "parquet" and sys.stdout.isatty():
                raise CliError("Parquet is binary: give --output FILE")
            store.export(family, sys.stdout.buffer, format=format_, package=package, vectors=vectors)
            return
        report = store.export(family, output, format=format_, package=package, vectors=vectors)
    if as_json:
        emit_json(report.as_dict())
    else:
        click.echo(terminal_safe(report.summary()), err=True)
