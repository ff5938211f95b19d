"""``ragstore index FAMILY SOURCE...``."""

from __future__ import annotations

import sys
from typing import Any

import click

from ragstore.cli.main import app, emit_json, interactive, terminal_safe
from ragstore.ingest.readers import not_read_line
from ragstore.ingest.writer import DEFAULT_BATCH


@click.command("index")
@click.argument("family")
@click.argument("sources", nargs=-1, required=True)
@click.option("--prune", is_flag=True, help="Delete chunks of the indexed packages that the input no longer has.")
@click.option("--batch-size", type=click.IntRange(1, 1_000_000), default=DEFAULT_BATCH, show_default=True)
@click.option(
    "--skip-bad-files",
    is_flag=True,
    help="Index the rest when a document cannot be read (not UTF-8, binary, unreadable); list what was skipped.",
)
@click.option(
    "--column",
    "columns",
    multiple=True,
    help="Parquet: FIELD=COLUMN maps a record field (chunk_id, package_path, text, vector, metadata, model) "
    "to a column; metadata=a,b builds the metadata from columns a and b.",
)
@click.option(
    "--as",
    "as_",
    metavar="NAME",
    default=None,
    help="Name the documents of the folders and documents given NAME/<path> instead of <folder name>/<path>.",
)
@click.option(
    "--replace-root",
    is_flag=True,
    help="Take over the prefix of a folder whose documents were last written from another folder.",
)
@click.option(
    "--chunk-tokens",
    type=click.IntRange(1),
    default=None,
    help="Documents: chunks of at most N of the model's word pieces (never more than it reads); N characters "
    "for a backend without a tokenizer (default: the model's window, else 1,200 characters).",
)
@click.option(
    "--overlap",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Documents: each chunk after a section's first starts with about N tokens (characters) of the one before.",
)
@click.option("--verbose", is_flag=True, help="List every file not read, with its reason.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
@click.pass_context
def index_command(
    ctx: click.Context,
    family: str,
    sources: tuple[str, ...],
    prune: bool,
    batch_size: int,
    skip_bad_files: bool,
    columns: tuple[str, ...],
    as_: str | None,
    replace_root: bool,
    chunk_tokens: int | None,
    overlap: int,
    verbose: bool,
    as_json: bool,
    progress: bool | None,
) -> None:
    """Index .jsonl/.ndjson/.parquet/.npy files, .txt/.md/.rst documents, folders, or - (JSONL on stdin) into FAMILY.

    Idempotent: a rerun over the same input writes nothing; unchanged chunks are never re-embedded. A
    folder's documents are named <folder name>/<path> (or NAME/<path> with --as NAME); a run whose folder
    name was last written from another folder is refused before it writes anything.
    """
    show_bar = interactive() if progress is None else progress
    bar: Any = None

    def started(total: int) -> None:
        nonlocal bar
        if show_bar:
            bar = click.progressbar(length=total, label=f"indexing {family}", file=sys.stderr)
            bar.__enter__()

    def advance(n: int) -> None:
        if bar is not None:
            bar.update(n)

    try:
        with app(ctx).store() as store:
            report = store.index_files(
                sources,
                family,
                prune=prune,
                batch_size=batch_size,
                skip_bad_files=skip_bad_files,
                as_=as_,
                replace_root=replace_root,
                chunk_tokens=chunk_tokens,
                overlap=overlap,
                columns=columns,
                progress=advance,
                on_validated=started,
            )
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
    skipped = report.skipped_files
    if as_json:
        read = [{"path": path, "reader": reader} for path, reader in sorted(report.documents.items())]
        emit_json(report.as_dict() | {"documents": read, "skipped_files": [item.as_dict() for item in skipped]})
        return
    click.echo(terminal_safe(report.summary()))
    summary = not_read_line(skipped)
    if summary is not None:
        click.echo(terminal_safe(summary + ("" if verbose else " (--verbose lists each)")))
    for item in skipped:
        if verbose or not item.group:
            click.echo(terminal_safe(f"skipped {item.path}: {item.reason}"))
