"""The options of the cross-encoder reranker and of HyDE, shared by ``search``, ``eval`` and ``context-pack``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ragstore.search.hyde import HYDE_MODES, Hyde
from ragstore.search.rerank import APIS, DEFAULT_DEPTH, HttpReranker

F = TypeVar("F", bound=Callable[..., Any])

RERANK_OPTIONS = ("reranker_url", "reranker_model", "reranker_api", "reranker_key_env", "reranker_key_file")
HYDE_OPTIONS = ("hyde_url", "hyde_model", "hyde_key_env", "hyde_key_file")


def reranker_options(func: F) -> F:
    """``--reranker-url``, ``--reranker-model``, ``--reranker-api``, ``--rerank-depth``, key and timeout."""
    options = [
        click.option(
            "--reranker-url",
            default=None,
            metavar="URL",
            help="The /rerank endpoint for --rerank cross (Cohere, Jina, TEI, Infinity, vLLM).",
        ),
        click.option("--reranker-model", default=None, help="Model name sent to the reranker (Cohere/Jina need it)."),
        click.option(
            "--reranker-api",
            type=click.Choice(APIS),
            default="cohere",
            show_default=True,
            help="Request shape: cohere sends 'documents', tei sends 'texts'.",
        ),
        click.option(
            "--rerank-depth",
            type=click.IntRange(1, 1000),
            default=DEFAULT_DEPTH,
            show_default=True,
            help="First-stage hits the reranker reorders.",
        ),
        click.option("--reranker-key-env", default=None, metavar="NAME", help="Env variable holding its API key."),
        click.option(
            "--reranker-key-file", default=None, type=click.Path(dir_okay=False), help="File holding its API key."
        ),
        click.option(
            "--reranker-timeout", type=float, default=30.0, show_default=True, help="Seconds per reranker request."
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def hyde_options(func: F) -> F:
    """``--hyde`` and the chat endpoint it asks."""
    options = [
        click.option("--hyde", is_flag=True, help="Search with a chat model's hypothetical answer (HyDE)."),
        click.option("--hyde-url", default=None, metavar="URL", help="OpenAI-compatible API root, e.g. .../v1."),
        click.option("--hyde-model", default=None, help="Chat model that writes the hypothetical answer."),
        click.option(
            "--hyde-mode",
            type=click.Choice(HYDE_MODES),
            default="average",
            show_default=True,
            help="average: mean of query and answer vectors; replace: the answer's vector alone.",
        ),
        click.option(
            "--hyde-key-env",
            default="OPENAI_API_KEY",
            show_default=True,
            metavar="NAME",
            help="Env variable holding the chat API key (none sent when unset).",
        ),
        click.option("--hyde-key-file", default=None, type=click.Path(dir_okay=False), help="File holding that key."),
        click.option("--hyde-timeout", type=float, default=30.0, show_default=True, help="Seconds per chat request."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def closing(*clients: HttpReranker | Hyde | None) -> contextlib.ExitStack:
    """A context that closes the given clients (None skipped) when it ends."""
    stack = contextlib.ExitStack()
    for client in clients:
        if client is not None:
            stack.callback(client.close)
    return stack


def make_reranker(rerank: str | None, opts: dict[str, Any]) -> HttpReranker | None:
    """The reranker ``--rerank cross`` asked for, or None; a usage error for options that do not fit."""
    if rerank != "cross":
        given = [name for name in RERANK_OPTIONS if opts.get(name) not in (None, "cohere")]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise click.UsageError(f"{flag} is used only with --rerank cross")
        return None
    if not opts.get("reranker_url"):
        raise click.UsageError("--rerank cross needs --reranker-url URL (a /rerank endpoint)")
    return HttpReranker(
        opts["reranker_url"],
        opts.get("reranker_model"),
        api=opts.get("reranker_api") or "cohere",
        api_key_env=opts.get("reranker_key_env"),
        api_key_file=opts.get("reranker_key_file"),
        timeout=opts.get("reranker_timeout") or 30.0,
    )


def make_hyde(opts: dict[str, Any]) -> Hyde | None:
    """The HyDE client ``--hyde`` asked for, or None; a usage error for options that do not fit."""
    if not opts.get("hyde"):
        given = [name for name in ("hyde_url", "hyde_model", "hyde_key_file") if opts.get(name) is not None]
        if given:
            raise click.UsageError(f"--{given[0].replace('_', '-')} is used only with --hyde")
        return None
    if not opts.get("hyde_url") or not opts.get("hyde_model"):
        raise click.UsageError("--hyde needs --hyde-url (an OpenAI-compatible API root) and --hyde-model")
    return Hyde(
        opts["hyde_url"],
        opts["hyde_model"],
        mode=opts.get("hyde_mode") or "average",
        api_key_env=opts.get("hyde_key_env"),
        api_key_file=opts.get("hyde_key_file"),
        timeout=opts.get("hyde_timeout") or 30.0,
    )
