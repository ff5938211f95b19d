"""The MCP server: ragstore's tools registered on the SDK's ``MCPServer``, served over stdio.

Every tool runs on one :class:`~ragstore.Store` opened on the DSN ``ragstore mcp`` was given, so every call
runs as that DSN's database role: the reader/app/owner grants and the row-level security of agent memory
hold exactly as through psql. ``memory_add`` exists only when the server was started with
``--allow-writes``. A :class:`~ragstore.errors.RagstoreError` becomes a tool error carrying its one-line
message; anything else becomes ``internal error: <type>`` (secrets masked), never a traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ragstore.errors import RagstoreError, mask_secrets
from ragstore.mcpserver import tools
from ragstore.store import Store

P = ParamSpec("P")
R = TypeVar("R")

INSTRUCTIONS = (
    "ragstore: retrieval over document families in PostgreSQL. Call list_families first, then search a "
    "family; cite hits by their citation field ([package_path#chunk_id]); fetch whole chunks with get_chunks."
)

Mode = Literal["auto", "hnsw", "exact", "fts", "hybrid"]
MaxChars = Annotated[
    int,
    Field(
        ge=200,
        le=tools.MAX_MAX_CHARS,
        description="Budget of the answer in characters; hits past it are cut or left out, with a note.",
    ),
]


def tool_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` with ragstore's errors as tool errors of one line, and no traceback for anything else."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except RagstoreError as exc:
            raise ToolError(mask_secrets(str(exc))) from None
        except Exception as exc:
            raise ToolError(f"internal error: {type(exc).__name__}: {mask_secrets(str(exc))}") from None

    return wrapper


def one_line(message: str) -> str:
    """A tool error's text on one line: the SDK's own argument errors (pydantic's) span several lines."""
    parts = [line.strip() for line in message.splitlines() if line.strip()]
    return "; ".join(part for part in parts if not part.startswith("For further information visit"))


async def one_line_errors(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: every tool error's text is one line, whoever raised it (a tool or the SDK)."""
    result = await call_next(ctx)
    # The runner hands the call's result on as its wire form, a dict.
    if isinstance(result, dict) and result.get("isError"):
        for block in result.get("content") or ():
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                block["text"] = one_line(block["text"])
    return result


def build_server(store: Store, *, allow_writes: bool = False) -> MCPServer[Any]:
    """An ``MCPServer`` whose tools call ``store``; ``memory_add`` only with ``allow_writes``."""
    server: MCPServer[Any] = MCPServer("ragstore", instructions=INSTRUCTIONS, middleware=[one_line_errors])

    @server.tool(
        description="Search a family of chunks for a text query. Hits come best first, each with its "
        "citation, chunk_id, package_path, heading/page when known, score and text."
    )
    @tool_errors
    def search(
        family: Annotated[str, Field(description="The family to search (see list_families).")],
        query: Annotated[str, Field(min_length=1, description="What to look for, in words.")],
        k: Annotated[int, Field(ge=1, le=tools.MAX_K, description="How many hits.")] = 10,
        mode: Annotated[
            Mode, Field(description="auto (the family's default), hnsw, exact, fts (full text) or hybrid.")
        ] = "auto",
        filter: Annotated[
            dict[str, Any] | None,
            Field(
                description='Metadata filter: containment {"lang": "en"} or operators '
                '{"year": {"$gte": 2020}, "tag": {"$in": ["a", "b"]}}.'
            ),
        ] = None,
        package: Annotated[str | None, Field(description="Only chunks whose package_path starts with this.")] = None,
        max_chars: MaxChars = tools.DEFAULT_MAX_CHARS,
    ) -> str:
        return tools.search(store, family, query, k, mode, filter, package, max_chars)

    @server.tool(description="The families that can be searched: name, embedding backend, model, dimension.")
    @tool_errors
    def list_families(max_chars: MaxChars = tools.DEFAULT_MAX_CHARS) -> str:
        return tools.list_families(store, max_chars)

    @server.tool(description="Whole chunks of a family by chunk id (as cited by search), and the ids not found.")
    @tool_errors
    def get_chunks(
        family: Annotated[str, Field(description="The family the chunks belong to.")],
        ids: Annotated[list[str], Field(min_length=1, max_length=tools.MAX_IDS, description="Chunk ids.")],
        max_chars: MaxChars = tools.DEFAULT_MAX_CHARS,
    ) -> str:
        return tools.get_chunks(store, family, ids, max_chars)

    @server.tool(
        description="Recall an agent's memory records nearest a query by meaning, words and recency. "
        "The database decides which agents' memory this connection may read."
    )
    @tool_errors
    def memory_recall(
        agent: Annotated[str, Field(description="The agent whose memory to recall.")],
        query: Annotated[str, Field(min_length=1, description="What to recall.")],
        k: Annotated[int, Field(ge=1, le=tools.MAX_K, description="How many records.")] = 8,
        stores: Annotated[
            list[Literal["episodic", "semantic", "procedural", "decision", "transcript"]] | None,
            Field(description="The memory stores to read (default: all five)."),
        ] = None,
        max_chars: MaxChars = tools.DEFAULT_MAX_CHARS,
    ) -> str:
        return tools.memory_recall(store, agent, query, k, stores, max_chars)

    @server.tool(
        description="An agent's memory composed as Markdown: per store, the newest records that pass the "
        "store's floors, within its caps (what the agent should know before a task)."
    )
    @tool_errors
    def memory_compose(
        agent: Annotated[str, Field(description="The agent whose memory to compose.")],
        stores: Annotated[
            list[Literal["episodic", "semantic", "procedural", "decision", "transcript"]] | None,
            Field(description="The memory stores to read (default: all five)."),
        ] = None,
        task_hint: Annotated[
            str | None, Field(description="Keep semantic/procedural records containing this text.")
        ] = None,
        max_chars: MaxChars = tools.DEFAULT_MAX_CHARS,
    ) -> str:
        return tools.memory_compose(store, agent, stores, task_hint, max_chars)

    if allow_writes:

        @server.tool(description="Append one record to an agent's memory (an identical record is not added twice).")
        @tool_errors
        def memory_add(
            agent: Annotated[str, Field(description="The agent whose memory this is.")],
            store_name: Annotated[
                Literal["episodic", "semantic", "procedural", "decision", "transcript"],
                Field(description="Which memory store."),
            ],
            content: Annotated[str, Field(min_length=1, description="The record's text.")],
            tags: Annotated[list[str], Field(description="Tags of the record.")] = [],  # noqa: B006 (copied by pydantic)
            salience: Annotated[float | None, Field(ge=0, le=1, description="Importance, 0..1.")] = None,
            confidence: Annotated[float | None, Field(ge=0, le=1, description="Confidence, 0..1.")] = None,
        ) -> str:
            return tools.memory_add(store, agent, store_name, content, tags, salience, confidence)

    return server


def serve_stdio(dsn: str, *, allow_writes: bool) -> None:
    """Open a Store on ``dsn`` and serve the tools over stdin/stdout until the client closes them."""
    import logging

    # The pool's own warnings (each failed connection attempt) would reach stderr through Python's last-resort
    # handler; a failure to connect is reported once, as the CLI's one-line error.
    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
    with Store(dsn, pool_size=2, timeout=10.0) as store:
        build_server(store, allow_writes=allow_writes).run("stdio")
