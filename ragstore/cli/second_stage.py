"""The options of the cross-encoder reranker and of HyDE, shared by ``search``, ``eval`` and ``context-pack``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ragstore.common.endpoint import MAX_TIMEOUT
from ragstore.search.hyde import HYDE_MODES, Hyde
from ragstore.search.rerank import APIS, DEFAULT_DEPTH, HttpReranker

F = TypeVar("F", bound=Callable[..., Any])

RERANK_OPTIONS = ("reranker_url", "reranker_model", "reranker_api", "reranker_key_env", "reranker_key_file")
HYDE_OPTIONS = ("hyde_url", "hyde_model", "hyde_key_env", "hyde_key_file")


# A request's deadline in seconds: above 0, at most MAX_TIMEOUT (the endpoint refuses NaN).
TIMEOUT = click.FloatRange(0.0, MAX_TIMEOUT, min_open=True)

# Each option as (flag, help, click.option's other keywords), in the order --help lists them. A choice
# defaults to its first choice; a default other than None is shown in the help.
Table = tuple[tuple[str, str, dict[str, Any]], ...]

RERANK_TABLE: Table = (
    (
        "--reranker-url",
        "The /rerank endpoint for --rerank cross (Cohere, Jina, TEI, Infinity, vLLM).",
        {"metavar": "URL"},
    ),
    ("--reranker-model", "Model name sent to the reranker (Cohere/Jina need it).", {}),
    ("--reranker-api", "Request shape: cohere sends 'documents', tei sends 'texts'.", {"type": click.Choice(APIS)}),
    (
        "--rerank-depth",
        "First-stage hits the reranker reorders.",
        {"type": click.IntRange(1, 1000), "default": DEFAULT_DEPTH},
    ),
    ("--reranker-key-env", "Env variable holding its API key.", {"metavar": "NAME"}),
    ("--reranker-key-file", "File holding its API key.", {"type": click.Path(dir_okay=False)}),
    ("--reranker-timeout", "Seconds per reranker request, to its last byte.", {"type": TIMEOUT, "default": 30.0}),
)

HYDE_TABLE: Table = (
    ("--hyde", "Search with a chat model's hypothetical answer (HyDE).", {"is_flag": True}),
    ("--hyde-url", "OpenAI-compatible API root, e.g. .../v1.", {"metavar": "URL"}),
    ("--hyde-model", "Chat model that writes the hypothetical answer.", {}),
    (
        "--hyde-mode",
        "average: mean of query and answer vectors; replace: the answer's vector alone.",
        {"type": click.Choice(HYDE_MODES)},
    ),
    (
        "--hyde-key-env",
        "Env variable holding the chat API key (none sent when unset).",
        {"default": "OPENAI_API_KEY", "metavar": "NAME"},
    ),
    ("--hyde-key-file", "File holding that key.", {"type": click.Path(dir_okay=False)}),
    ("--hyde-timeout", "Seconds per chat request, to its last byte.", {"type": TIMEOUT, "default": 30.0}),
)


def add_options(func: F, table: Table) -> F:
    """``func`` with the click options of ``table``, listed by --help in the table's order."""
    for flag, help_text, settings in reversed(table):
        kind = settings.get("type")
        if isinstance(kind, click.Choice):
            settings = {"default": kind.choices[0], **settings}
        shown = settings.get("default") is not None and not settings.get("is_flag")
        func = click.option(flag, help=help_text, show_default=shown, **settings)(func)
    return func


def reranker_options(func: F) -> F:
    """``--reranker-url``, ``--reranker-model``, ``--reranker-api``, ``--rerank-depth``, key and timeout."""
    return add_options(func, RERANK_TABLE)


def hyde_options(func: F) -> F:
    """``--hyde`` and the chat endpoint it asks."""
    return add_options(func, HYDE_TABLE)


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
