"""The MCP server: ragstore's tools and resources registered on the SDK's ``MCPServer`` from one table.

Each tool is a module-level function whose typed signature is its input schema and whose docstring is the
description the model reads; :data:`READ_TOOLS` and :data:`WRITE_TOOLS` list them, and :func:`build_server`
registers the read tools always and the write tools only with ``--allow-writes``. A tool reaches its
:class:`~ragstore.Store` through :func:`store`: over stdio the one opened on the DSN ``ragstore mcp`` was
given, over HTTP with ``--tokens`` the one of the request's token role (ragstore/mcpserver/http.py). So
every call runs as a database role, and the reader/app/owner grants and the row-level security of agent
memory hold exactly as through psql. A :class:`~ragstore.errors.RagstoreError` becomes a tool error
carrying its one-line message; anything else becomes ``internal error: <type>`` (secrets masked), never a
traceback.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import MCPServerError, ResourceError, ToolError
from mcp_types import Resource as MCPResource
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from ragstore.errors import RagstoreError, mask_secrets
from ragstore.mcpserver import tools
from ragstore.search.rerank import DEFAULT_DEPTH, HttpReranker
from ragstore.store import Store

P = ParamSpec("P")
R = TypeVar("R")

INSTRUCTIONS = (
    "ragstore: retrieval over document families in PostgreSQL. Call list_families first, then search a "
    "family; cite hits by their citation field ([package_path#chunk_id]); fetch whole chunks with get_chunks; "
    "build a budgeted context pack for a task with context_pack."
)

Mode = Literal["auto", "hnsw", "exact", "fts", "hybrid"]
MemoryStore = Literal["episodic", "semantic", "procedural", "decision", "transcript"]
MaxChars = Annotated[
    int,
    Field(
        ge=200,
        le=tools.MAX_MAX_CHARS,
        description="Budget of the answer in characters; hits past it are cut or left out, with a note.",
    ),
]
Family = Annotated[str, Field(description="The family (see list_families).")]
Rerank = Annotated[
    Literal["mmr", "cross"] | None,
    Field(
        description="mmr: re-rank the top 50 for diversity (maximal marginal relevance); cross: re-rank the "
        "top rerank_depth hits with the server's cross-encoder (when it was started with --reranker-url)."
    ),
]
RerankDepth = Annotated[
    int, Field(ge=1, le=1000, description="With rerank=cross: how many first-stage hits the cross-encoder reorders.")
]
MmrLambda = Annotated[float, Field(ge=0, le=1, description="With rerank=mmr: weight of relevance against diversity.")]
Stores = Annotated[list[MemoryStore] | None, Field(description="The memory stores to read (default: all five).")]

_current: contextvars.ContextVar[Callable[[], Store]] = contextvars.ContextVar("ragstore_mcp_store")
_reranker: contextvars.ContextVar[HttpReranker | None] = contextvars.ContextVar("ragstore_mcp_reranker", default=None)


def store() -> Store:
    """The Store of the call at hand (set for every request by :func:`build_server`'s middleware)."""
    return _current.get()()


def refusals(kind: type[MCPServerError]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``fn`` with ragstore's errors as ``kind`` errors of one line, and no traceback for anything else."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except RagstoreError as exc:
                raise kind(mask_secrets(str(exc))) from None
            except Exception as exc:
                raise kind(f"internal error: {type(exc).__name__}: {mask_secrets(str(exc))}") from None

        return wrapper

    return decorate


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


# The tools. Each docstring is the description the model reads.


def search(
    family: Family,
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
    rerank: Rerank = None,
    mmr_lambda: MmrLambda = 0.5,
    rerank_depth: RerankDepth = DEFAULT_DEPTH,
) -> str:
    """Search a family of chunks for a text query. Hits come best first, each with its citation, chunk_id,
    package_path, heading/page when known, score and text (and rerank_score after rerank=cross)."""
    return tools.search(
        store(), family, query, k, mode, filter, package, max_chars, rerank, mmr_lambda, _reranker.get(), rerank_depth
    )


def list_families(max_chars: MaxChars = tools.DEFAULT_MAX_CHARS) -> str:
    """The families that can be searched: name, embedding backend, model, dimension."""
    return tools.list_families(store(), max_chars)


def get_chunks(
    family: Family,
    ids: Annotated[list[str], Field(min_length=1, max_length=tools.MAX_IDS, description="Chunk ids.")],
    max_chars: MaxChars = tools.DEFAULT_MAX_CHARS,
) -> str:
    """Whole chunks of a family by chunk id (as cited by search), and the ids not found."""
    return tools.get_chunks(store(), family, ids, max_chars)


def context_pack(
    brief: Annotated[str, Field(min_length=1, description="The task, in one line (the pack's L0).")],
    family: Annotated[str | None, Field(description="Retrieve snippets from this family (with query).")] = None,
    query: Annotated[str | None, Field(min_length=1, description="What to retrieve (with family).")] = None,
    k: Annotated[int, Field(ge=1, le=tools.MAX_K, description="How many hits become snippets.")] = 8,
    mode: Annotated[Mode, Field(description="The search mode of the retrieval.")] = "hybrid",
    rerank: Rerank = None,
    mmr_lambda: MmrLambda = 0.5,
    summaries: Annotated[list[str], Field(description="Compressed summaries to include (L4).")] = [],  # noqa: B006 (copied by pydantic)
    constraints: Annotated[list[str], Field(description="Constraints on the task (L6).")] = [],  # noqa: B006
    artifacts: Annotated[list[str], Field(description="Artifacts by reference: paths, URLs, ids (L6).")] = [],  # noqa: B006
    max_tokens: Annotated[
        int | None, Field(ge=1, description="The pack's token budget (default: max_chars / 4).")
    ] = None,
    format: Annotated[
        Literal["markdown", "json"], Field(description="markdown (to read) or json (the canonical pack).")
    ] = "markdown",
    max_chars: MaxChars = tools.DEFAULT_MAX_CHARS,
) -> str:
    """A context pack for a task: the brief, the top hits of a search as ranked snippets with their
    citations, and the given summaries and constraints, within a token budget (the lowest-ranked snippets
    are shed first, then whole layers; never the brief). Answers the pack and the citations it kept."""
    return tools.context_pack(
        store(),
        brief,
        family,
        query,
        k,
        mode,
        rerank,
        mmr_lambda,
        summaries,
        constraints,
        artifacts,
        max_tokens,
        format,
        max_chars,
    )


def memory_recall(
    agent: Annotated[str, Field(description="The agent whose memory to recall.")],
    query: Annotated[str, Field(min_length=1, description="What to recall.")],
    k: Annotated[int, Field(ge=1, le=tools.MAX_K, description="How many records.")] = 8,
    stores: Stores = None,
    max_chars: MaxChars = tools.DEFAULT_MAX_CHARS,
) -> str:
    """Recall an agent's memory records nearest a query by meaning, words and recency. The database decides
    which agents' memory this connection may read."""
    return tools.memory_recall(store(), agent, query, k, stores, max_chars)


def memory_compose(
    agent: Annotated[str, Field(description="The agent whose memory to compose.")],
    stores: Stores = None,
    task_hint: Annotated[
        str | None, Field(description="Keep semantic/procedural records containing this text.")
    ] = None,
    max_chars: MaxChars = tools.DEFAULT_MAX_CHARS,
) -> str:
    """An agent's memory composed as Markdown: per store, the newest records that pass the store's floors,
    within its caps (what the agent should know before a task)."""
    return tools.memory_compose(store(), agent, stores, task_hint, max_chars)


def memory_add(
    agent: Annotated[str, Field(description="The agent whose memory this is.")],
    store_name: Annotated[MemoryStore, Field(description="Which memory store.")],
    content: Annotated[str, Field(min_length=1, description="The record's text.")],
    tags: Annotated[list[str], Field(description="Tags of the record.")] = [],  # noqa: B006 (copied by pydantic)
    salience: Annotated[float | None, Field(ge=0, le=1, description="Importance, 0..1.")] = None,
    confidence: Annotated[float | None, Field(ge=0, le=1, description="Confidence, 0..1.")] = None,
) -> str:
    """Append one record to an agent's memory (an identical record is not added twice)."""
    return tools.memory_add(store(), agent, store_name, content, tags, salience, confidence)


class Text(BaseModel):
    """One text to index: where it belongs and what it says."""

    model_config = ConfigDict(extra="forbid")

    package_path: str = Field(min_length=1, description="The document it belongs to (cited as package_path#id).")
    text: str = Field(min_length=1, max_length=tools.MAX_TEXT_CHARS, description="The chunk's text.")
    chunk_id: str | None = Field(default=None, description="Its id (default: package_path#<hash of the text>).")
    metadata: dict[str, Any] | None = Field(default=None, description='Metadata, e.g. {"heading": "Intro"}.')


def index_text(
    family: Family,
    texts: Annotated[list[Text], Field(min_length=1, max_length=tools.MAX_TEXTS, description="The texts.")],
) -> str:
    """Index texts into a family as chunks (embedded with the family's own backend); a chunk with the same id
    is replaced, nothing else is deleted. Answers the counts and the chunk ids."""
    return tools.index_text(store(), family, [t.model_dump() for t in texts])


READ_TOOLS: tuple[Callable[..., str], ...] = (
    search,
    list_families,
    get_chunks,
    context_pack,
    memory_recall,
    memory_compose,
)
WRITE_TOOLS: tuple[Callable[..., str], ...] = (memory_add, index_text)


# The resources: the families.


def families_resource() -> str:
    """Every family that can be searched, with the URI of its own resource."""
    return tools.families_resource(store())


def family_resource(name: str) -> str:
    """A family: its embedding backend, model and dimension, its counts and its first chunks' citations."""
    return tools.family_resource(store(), name)


class FamiliesServer(MCPServer[Any]):
    """``MCPServer`` whose ``resources/list`` also names one resource per family (``ragstore://families/
    <name>``, read through the family template), as the caller's role sees them when the list is asked."""

    async def list_resources(self) -> list[MCPResource]:
        listed = await super().list_resources()
        try:
            # In a worker thread (the Store is synchronous), with this request's context (its Store).
            families = await asyncio.to_thread(tools.family_uris, store())
        except RagstoreError as exc:
            raise ResourceError(mask_secrets(str(exc))) from None
        return listed + [
            MCPResource(uri=uri, name=name, description=what, mime_type="application/json")
            for uri, name, what in families
        ]


def build_server(
    source: Store | Callable[[], Store],
    *,
    allow_writes: bool = False,
    middleware: Sequence[ServerMiddleware[Any]] = (),
    reranker: HttpReranker | None = None,
) -> MCPServer[Any]:
    """An ``MCPServer`` whose tools call ``source`` (a Store, or a callable giving the Store of the call at
    hand); the write tools only with ``allow_writes``; ``search``'s ``rerank="cross"`` with ``reranker``."""
    current: Callable[[], Store] = source if callable(source) else (lambda: source)

    async def bind_store(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        marker, crossing = _current.set(current), _reranker.set(reranker)
        try:
            return await call_next(ctx)
        finally:
            _reranker.reset(crossing)
            _current.reset(marker)

    server: MCPServer[Any] = FamiliesServer(
        "ragstore", instructions=INSTRUCTIONS, middleware=[one_line_errors, bind_store, *middleware]
    )
    for fn in READ_TOOLS:
        server.add_tool(refusals(ToolError)(fn), annotations=ToolAnnotations(read_only_hint=True))
    if allow_writes:
        for fn in WRITE_TOOLS:
            server.add_tool(
                refusals(ToolError)(fn), annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False)
            )
    server.resource(tools.FAMILIES_URI, name="families", mime_type="application/json")(
        refusals(ResourceError)(families_resource)
    )
    server.resource(tools.FAMILY_URI, name="family", mime_type="application/json")(
        refusals(ResourceError)(family_resource)
    )
    return server


def serve_stdio(dsn: str, *, allow_writes: bool, reranker: HttpReranker | None = None) -> None:
    """Open a Store on ``dsn`` and serve the tools over stdin/stdout until the client closes them."""
    import logging

    # The pool's own warnings (each failed connection attempt) would reach stderr through Python's last-resort
    # handler; a failure to connect is reported once, as the CLI's one-line error.
    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
    with Store(dsn, pool_size=2, timeout=10.0, recover=True) as s:
        build_server(s, allow_writes=allow_writes, reranker=reranker).run("stdio")
