"""``ragstore embed similarity|rank|text|status``: ad-hoc embeddings with any backend, no index needed.

Every command takes ``--backend NAME`` (with ``--model``, ``--base-url``, ``--dimensions``,
``--api-key-env`` for providers) or ``--family F`` (the backend and model that built family F), and
``--json``. An API key is never printed: ``status`` says whether it is set, masked.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import click

from ragstore.cli.main import CliError, app, emit_json, terminal_safe
from ragstore.embed.base import Backend
from ragstore.embed.registry import backend_settings
from ragstore.embed.similarity import rank_texts, similarity
from ragstore.families import BACKENDS, make_backend

Command = Callable[..., Any]


def _backend_options(command: Command) -> Command:
    options = [
        click.option(
            "--backend",
            "backend_name",
            type=click.Choice(BACKENDS),
            default=None,
            help="Backend to embed with (default: offline).",
        ),
        click.option("--family", default=None, help="Use the backend and model of this family (needs the database)."),
        click.option("--model", default=None, help="Model name (required for --backend openai)."),
        click.option("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."),
        click.option("--dimensions", type=click.IntRange(1), default=None, help="Shorter vectors (Matryoshka)."),
        click.option("--api-key-env", default=None, help="Environment variable holding the API key."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON document."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _resolve(ctx: click.Context, params: dict[str, Any]) -> tuple[Backend, dict[str, Any], str | None]:
    """The backend the options name, the settings it was made with, and the family (if any)."""
    family_name = params["family"]
    settings = backend_settings(params["base_url"], params["dimensions"], params["api_key_env"])
    if family_name:
        if params["backend_name"] or params["model"] or settings:
            raise CliError("--family takes the backend and its settings from the family: drop the other options")
        from ragstore.families import backend_options

        with app(ctx).store() as store:
            recorded = backend_options(store.family(family_name))
            backend = store.embedder(family_name)
        return backend, recorded, family_name
    backend = make_backend(params["backend_name"] or "offline", model=params["model"], **settings)
    return backend, settings, None


def _identity(backend: Backend) -> dict[str, Any]:
    return {"backend": backend.name, "model": backend.model, "dim": backend.dim}


@click.group("embed")
def embed_group() -> None:
    """Embed texts ad hoc (similarity, ranking, vectors) with any backend, without an index."""


@embed_group.command("similarity")
@click.argument("a")
@click.argument("b")
@_backend_options
@click.pass_context
def embed_similarity(ctx: click.Context, /, a: str, b: str, as_json: bool, **params: Any) -> None:
    """Cosine similarity of texts A and B."""
    backend, _, _ = _resolve(ctx, params)
    score = similarity(backend, a, b)
    if as_json:
        emit_json(_identity(backend) | {"similarity": score})
    else:
        click.echo(f"{score:.6f}")


@embed_group.command("rank")
@click.argument("query")
@click.argument("candidates", nargs=-1, required=True)
@_backend_options
@click.pass_context
def embed_rank(ctx: click.Context, /, query: str, candidates: tuple[str, ...], as_json: bool, **params: Any) -> None:
    """Rank CANDIDATES by cosine similarity to QUERY (highest first; ties keep input order)."""
    backend, _, _ = _resolve(ctx, params)
    ranked = [asdict(row) for row in rank_texts(backend, query, candidates)]
    if as_json:
        emit_json(_identity(backend) | {"query": query, "ranking": ranked})
        return
    for row in ranked:
        click.echo(terminal_safe(f"{row['rank']:>3}  {row['score']:.6f}  {row['text']}"))


def _read_texts(texts: Sequence[str]) -> list[str]:
    if list(texts) == ["-"]:
        return [line.rstrip("\r\n") for line in sys.stdin if line.strip()]
    if "-" in texts:
        raise CliError("`-` (texts from stdin, one a line) cannot be mixed with texts on the command line")
    return list(texts)


@embed_group.command("text")
@click.argument("texts", nargs=-1, required=True)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write JSONL here (one {text, embedding, model, dim} a line) instead of stdout.",
)
@_backend_options
@click.pass_context
def embed_text(ctx: click.Context, /, texts: tuple[str, ...], out: str | None, as_json: bool, **params: Any) -> None:
    """Embed TEXTS (or `-`: one text a line on stdin) and print JSONL, one vector a line."""
    chosen = _read_texts(texts)
    if not chosen:
        raise CliError("no text to embed")
    backend, _, _ = _resolve(ctx, params)
    matrix = backend.embed(chosen)
    rows = [
        {"text": text, "embedding": [float(x) for x in vector], "model": backend.model, "dim": backend.dim}
        for text, vector in zip(chosen, matrix, strict=True)
    ]
    if out is not None:
        with open(out, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
        if as_json:
            emit_json(_identity(backend) | {"out": out, "count": len(rows)})
        else:
            click.echo(f"wrote {len(rows)} vectors ({backend.name}/{backend.model}, {backend.dim}-d) to {out}")
        return
    if as_json:
        emit_json(_identity(backend) | {"vectors": rows})
        return
    for row in rows:
        click.echo(json.dumps(row, ensure_ascii=False, sort_keys=True))


def _masked_key(settings: dict[str, Any], backend: Backend) -> str | None:
    if backend.name != "openai":
        return None
    value = os.environ.get(str(settings.get("api_key_env") or "OPENAI_API_KEY"), "").strip()
    return "***" if value else "not set"


@embed_group.command("status")
@_backend_options
@click.pass_context
def embed_status(ctx: click.Context, /, as_json: bool, **params: Any) -> None:
    """The backend, model and dimension a command would use (an API key is only said to be set, as ***)."""
    backend, settings, family = _resolve(ctx, params)
    data = _identity(backend) | {"family": family, "options": settings, "api_key": _masked_key(settings, backend)}
    if as_json:
        emit_json(data)
        return
    lines = [f"backend: {backend.name}", f"model:   {backend.model}", f"dim:     {backend.dim}"]
    if family:
        lines.insert(0, f"family:  {family}")
    lines += [f"{k}: {v}" for k, v in sorted(settings.items())]
    if data["api_key"] is not None:
        lines.append(f"api key: {data['api_key']}")
    click.echo("\n".join(lines))
