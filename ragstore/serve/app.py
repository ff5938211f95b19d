"""The HTTP JSON API of ``ragstore serve``: FastAPI on :class:`~ragstore.AsyncStore`, each request as its token's role.

Every ``/v1`` request carries ``Authorization: Bearer <token>`` (:mod:`ragstore.serve.tokens`); the token
names a database role, and the request runs on connections opened as that role (``-c role=<role>`` at
connect: an :class:`~ragstore.AsyncStore` per role, made on first use), so the reader/app/owner grants and
the memory row-level security hold exactly as through psql. The login role reads the tokens (the owner
side's table) and must be allowed to ``SET ROLE`` to each token's role. Errors are ``{"error": "<one
line>"}``, the message the CLI prints; a missing, malformed, unknown or revoked token is a bare 401.

Every request's token is checked against the database, so a revocation holds from the next request on.
A plain search does not wait for that check before it starts: the server remembers the role the
database last gave a token (with the SHA-256 it then held, compared in constant time) and runs the search
as that role while the check runs; it answers once both are done, with the hits only when the check
passed (:meth:`Stores.speculate`). Everything else, and a search with a second stage that calls out, waits
for the check first.
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

import orjson
import psycopg
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import HTTPException, RequestValidationError
from fastapi.responses import JSONResponse
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pydantic import BaseModel, ConfigDict, Field

from ragstore.db.connection import map_db_error
from ragstore.db.sqlfiles import query as sql_query
from ragstore.errors import (
    Conflict,
    DatabaseUnavailable,
    FingerprintVectorsWarning,
    InvalidInput,
    NotFound,
    PermissionDenied,
    RagstoreError,
    SchemaError,
    Timeout,
    mask_secrets,
)
from ragstore.search.api import MAX_K
from ragstore.search.hyde import Hyde
from ragstore.search.rerank import DEFAULT_DEPTH, HttpReranker
from ragstore.serve import tokens
from ragstore.store_async import AsyncStore

# What a request may send and ask for at most.
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_QUERY_CHARS = 8_000
MAX_IDS = 1_000
MAX_RECORDS = 5_000
# Distinct token roles one server keeps connections for (each has its own pool).
MAX_ROLES = 16
# Tokens whose role a server remembers (Stores.remembered); past this it forgets them all and relearns.
MAX_KNOWN = 10_000

R = TypeVar("R")
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Settings:
    """``dsn`` the server logs in with (already resolved: no embedded start here); ``pool_size`` each
    role's pool; ``pool_timeout`` seconds a request waits for a connection (then 503: a database that is
    down answers fast); ``max_body`` bytes of a request body; ``reranker`` and ``hyde`` the second-stage
    endpoints the server was started with (a request asks for them, it never names an endpoint)."""

    dsn: str
    pool_size: int = 4
    max_body: int = MAX_BODY_BYTES
    reranker: HttpReranker | None = None
    hyde: Hyde | None = None
    pool_timeout: float = 10.0


class Unauthorized(Exception):
    """No token, or one that is malformed, unknown, revoked or wrong: 401, without saying which."""


class BodyTooLarge(HTTPException):
    """Raised while the app reads a body past the limit (FastAPI passes an HTTPException of the reading on)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over {limit} bytes")


_STATUS: list[tuple[type[RagstoreError], int]] = [
    (PermissionDenied, 403),
    (NotFound, 404),
    (Conflict, 409),
    (Timeout, 504),
    (DatabaseUnavailable, 503),
    (SchemaError, 500),
    (InvalidInput, 400),
]


def status_of(exc: RagstoreError) -> int:
    return next((code for kind, code in _STATUS if isinstance(exc, kind)), 500)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    line = " ".join(mask_secrets(message).split())
    return JSONResponse({"error": line}, status_code=status, headers=headers)


class Json(JSONResponse):
    """JSONResponse that also writes numpy scalars (a score of the exact path) as the numbers they are."""

    def render(self, content: Any) -> bytes:
        # orjson: the hot path's encoding, faster than json.dumps; the same text (UTF-8, shortest floats).
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


def role_dsn(dsn: str, role: str) -> str:
    """``dsn`` whose sessions start as ``role`` (``-c role=...`` in its options, spaces escaped as libpq reads them)."""
    escaped = role.replace("\\", "\\\\").replace(" ", "\\ ")
    options = str(conninfo_to_dict(dsn).get("options") or "")
    return make_conninfo(dsn, options=f"{options} -c role={escaped}".strip())


class Stores:
    """The login role's AsyncStore (tokens, health) and one per token role, opened on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._login: AsyncStore | None = None
        self._roles: dict[str, AsyncStore] = {}
        self._lock = asyncio.Lock()
        self._marked: dict[int, float] = {}  # token id: when this server last marked it used
        # token id: (role, SHA-256 of the secret) as the database last answered for it; never an
        # authorization by itself, only the role a search may start as while the database checks
        self._known: dict[int, tuple[str, bytes]] = {}

    async def open(self) -> None:
        timeout = self.settings.pool_timeout
        self._login = await AsyncStore(
            self.settings.dsn, pool_size=2, worker_pool_size=1, timeout=timeout, recover=True
        ).open()

    @property
    def login(self) -> AsyncStore:
        if self._login is None:
            raise DatabaseUnavailable("the server is not started")
        return self._login

    async def close(self) -> None:
        stores, self._roles = list(self._roles.values()), {}
        for store in stores:
            await store.close()
        if self._login is not None:
            await self._login.close()
            self._login = None

    async def role_of(self, token: str) -> str:
        """The role the database gives ``token`` now (Unauthorized for none): one lookup."""
        parsed = tokens.parse(token)
        try:
            role = await self.login.read(lambda conn: tokens.authenticate(conn, token, self._marked))
        except psycopg.Error as exc:
            map_db_error(exc)
        if parsed is not None:
            if role is None:
                self._known.pop(parsed[0], None)
            else:
                if len(self._known) >= MAX_KNOWN:
                    self._known.clear()
                self._known[parsed[0]] = (role, tokens.digest(parsed[1]))
        if role is None:
            raise Unauthorized
        return role

    def remembered(self, token: str) -> str | None:
        """The role the database last gave ``token``, when its secret hashes to what the database then
        held (constant time); None for a token not seen or not matching. Not an authorization."""
        parsed = tokens.parse(token)
        known = self._known.get(parsed[0]) if parsed is not None else None
        if parsed is None or known is None or not tokens.matches(known[1], parsed[1]):
            return None
        return known[0]

    async def speculate(self, token: str, run: Callable[[AsyncStore], Awaitable[R]]) -> R:
        """``run(store)`` on the store of ``token``'s role, answered only when the database says now that
        the token is live and has that role (else Unauthorized, whatever ``run`` gave). A token this server
        has seen runs ``run`` while the database checks it; any other is checked first."""
        guess = self.remembered(token)
        if guess is None:
            return await run(await self.for_role(await self.role_of(token)))
        # The search is sent to the database first, the check right after it (tasks start in order).
        work = asyncio.ensure_future(run(await self.for_role(guess)))
        check = asyncio.ensure_future(self.role_of(token))
        try:
            role = await check
        except BaseException:
            # The answer is thrown away; the work is awaited (not cancelled) so that its connection goes
            # back to the pool clean.
            with contextlib.suppress(BaseException):
                await work
            raise
        if role != guess:  # the owner changed the token's role: its work is redone as the role it has now
            with contextlib.suppress(BaseException):
                await work
            return await run(await self.for_role(role))
        return await work

    async def for_role(self, role: str) -> AsyncStore:
        store = self._roles.get(role)
        if store is not None:
            return store
        async with self._lock:
            store = self._roles.get(role)
            if store is not None:
                return store
            if len(self._roles) >= MAX_ROLES:
                raise DatabaseUnavailable(f"this server serves at most {MAX_ROLES} token roles at once")
            try:
                async with self.login.connection() as conn:
                    cursor = await conn.execute(sql_query("serve", "may_act_as"), {"role": role})
                    row = await cursor.fetchone()
            except psycopg.Error as exc:
                map_db_error(exc)
            if row is None or not row[0]:
                raise PermissionDenied(f"permission denied: the server's login role may not act as role {role!r}")
            store = AsyncStore(
                role_dsn(self.settings.dsn, role),
                pool_size=self.settings.pool_size,
                timeout=self.settings.pool_timeout,
                recover=True,  # a connection the database dropped while idle is replaced, not lent
            )
            await store.open()
            self._roles[role] = store
            return store


async def bearer_token(request: Request) -> str:
    """The request's bearer token (Unauthorized when there is none). A coroutine, though it awaits
    nothing: FastAPI runs a plain function dependency in a worker thread, a thread hop per request that was
    the largest share of the server's own time (benchmarks/README.md)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized
    return token.strip()


async def caller(request: Request) -> AsyncStore:
    """The AsyncStore of the request's token role, once the database said the token is live (401 else)."""
    stores: Stores = request.app.state.stores
    return await stores.for_role(await stores.role_of(await bearer_token(request)))


Caller = Annotated[AsyncStore, Depends(caller)]
Token = Annotated[str, Depends(bearer_token)]


class ErrorBody(BaseModel):
    """Every error: the one line the CLI prints for it."""

    error: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": what}
    for code, what in [
        (400, "invalid input: a field, a filter, a record"),
        (401, "no token, or a malformed, unknown or revoked one"),
        (403, "the token's database role lacks the privilege (the database's refusal)"),
        (404, "no such family"),
        (413, "the request body is over the server's limit"),
        (503, "the database does not answer"),
        (504, "a statement ran past the statement timeout"),
    ]
}


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchBody(Body):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The query text.")
    k: int = Field(10, ge=1, le=MAX_K, description=f"How many hits (at most {MAX_K}).")
    mode: Literal["auto", "hnsw", "exact", "fts", "hybrid"] = "auto"
    package: str | None = Field(None, description="Only chunks whose package_path starts with this.")
    where: dict[str, Any] | None = Field(
        None, description='Metadata filter, as `ragstore search --where`: {"lang": "en"}.'
    )
    min_score: float | None = None
    ef_search: int | None = Field(None, ge=1, le=1000)
    rerank: Literal["mmr", "cross"] | None = Field(
        None, description="mmr: diversity; cross: the cross-encoder the server was started with (--reranker-url)."
    )
    mmr_lambda: float = Field(0.5, ge=0, le=1)
    fetch_k: int = Field(50, ge=1, le=MAX_K)
    rerank_depth: int = Field(DEFAULT_DEPTH, ge=1, le=MAX_K, description="First-stage hits the cross-encoder reorders.")
    hyde: bool = Field(False, description="Search with a hypothetical answer (the server's --hyde endpoint).")
    fusion: Literal["rrf", "cc"] | None = None
    alpha: float | None = Field(None, ge=0, le=1)


class IndexBody(Body):
    records: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_RECORDS,
        description="Chunk records, as the lines of a JSONL file `ragstore index` reads.",
    )


class RecallBody(Body):
    stores: list[Literal["episodic", "semantic", "procedural", "decision", "transcript"]] = Field(
        min_length=1, description="The stores to read (the agent's profile)."
    )
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(8, ge=1, le=MAX_K)


MemoryStore = Literal["episodic", "semantic", "procedural", "decision", "transcript"]


class ComposeBody(Body):
    stores: list[MemoryStore] = Field(min_length=1, description="The stores to compose (the agent's profile).")
    task_hint: str | None = Field(
        None, max_length=MAX_QUERY_CHARS, description="Keep semantic/procedural records containing this text."
    )
    format: Literal["json", "markdown"] = Field("json", description="json: the bundle; markdown: for a prompt.")


class PackRetrieve(Body):
    family: str = Field(min_length=1, description="The family L3's snippets come from.")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(8, ge=1, le=MAX_K)
    mode: Literal["auto", "hnsw", "exact", "fts", "hybrid"] = "hybrid"
    rerank: Literal["mmr", "cross"] | None = None
    mmr_lambda: float = Field(0.5, ge=0, le=1)
    rerank_depth: int = Field(DEFAULT_DEPTH, ge=1, le=MAX_K)
    hyde: bool = False


class PackMemory(Body):
    agent: str = Field(min_length=1, description="L4/L5: this agent's composed memory (as its token may read).")
    stores: list[MemoryStore] = Field(min_length=1)
    task_hint: str | None = Field(None, max_length=MAX_QUERY_CHARS)


class PackBody(Body):
    brief: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="L0: the task in one line.")
    max_tokens: int = Field(ge=1, le=10_000_000, description="The token budget (reported; enforced with shed).")
    retrieve: PackRetrieve | None = Field(None, description="L3: the hits of this search.")
    memory: PackMemory | None = None
    summaries: list[str] = Field([], max_length=MAX_RECORDS, description="L4: compressed summaries.")
    state: dict[str, Any] = Field({}, description="L5: debate/phase state.")
    artifacts: list[str] = Field([], max_length=MAX_RECORDS, description="L6: artifacts, by reference.")
    constraints: list[str] = Field([], max_length=MAX_RECORDS, description="L6: constraints.")
    shed: Literal["layers", "within-layers"] | None = Field(
        None, description="layers: drop L7, L6, ... until it fits; within-layers: low-ranked snippets first."
    )
    format: Literal["json", "markdown"] = Field("json", description="markdown adds the rendered pack.")


class RecordsBody(Body):
    records: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_RECORDS,
        description="Memory records of this agent, as `ragstore memory import` reads.",
    )


def create_app(settings: Settings) -> FastAPI:
    """The app; its lifespan opens the stores and closes them once the last request finished."""
    stores = Stores(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await stores.open()
        try:
            yield
        finally:
            await stores.close()

    app = FastAPI(
        title="ragstore",
        summary="The HTTP JSON API of ragstore: search, chunks and families, as the bearer token's database role.",
        version="1",
        lifespan=lifespan,
        responses=_ERRORS,
    )
    app.state.stores = stores
    _handlers(app)
    _openapi_without_422(app)

    @app.get("/healthz", summary="Whether the server and its database answer (no token needed).")
    async def healthz() -> dict[str, str]:
        try:
            await stores.login.read(lambda conn: conn.execute("SELECT 1"))
        except psycopg.Error as exc:
            map_db_error(exc)
        return {"status": "ok"}

    @app.get("/v1/families", summary="The families, as `ragstore family list --json`.")
    async def list_families(store: Caller) -> dict[str, Any]:
        return {"families": [f.as_dict() for f in await store.families()]}

    @app.post(
        "/v1/families/{family}/search",
        summary="Search FAMILY, as `ragstore search --json`.",
        response_model=dict[str, Any],
    )
    async def search(family: str, body: SearchBody, token: Token) -> JSONResponse:
        async def run(store: AsyncStore) -> list[Any]:
            options = second_stage(settings, body.rerank, body.rerank_depth, body.hyde)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FingerprintVectorsWarning)
                return await store.search(
                    family,
                    body.query,
                    k=body.k,
                    mode=body.mode,
                    package=body.package,
                    metadata=body.where,
                    min_score=body.min_score,
                    ef_search=body.ef_search,
                    mmr_lambda=body.mmr_lambda,
                    fetch_k=body.fetch_k,
                    fusion=body.fusion,
                    alpha=body.alpha,
                    **options,
                )

        if body.rerank == "cross" or body.hyde:  # calls out to the server's endpoints: the token first
            hits = await run(await stores.for_role(await stores.role_of(token)))
        else:
            hits = await stores.speculate(token, run)
        # Straight to JSON: the hot path skips FastAPI's re-validation and re-encoding of the answer.
        return Json({"family": family, "query": body.query, "hits": [h.as_dict() for h in hits]})

    @app.get("/v1/families/{family}/chunks", summary="The chunks with these ids, as `ragstore get --json`.")
    async def get_chunks(
        family: str, store: Caller, id: Annotated[list[str], Query(min_length=1, max_length=MAX_IDS)]
    ) -> dict[str, Any]:
        result = await store.get(family, id)
        return {"family": result.family, "chunks": [c.as_dict() for c in result.chunks], "missing": result.missing}

    @app.post("/v1/families/{family}/chunks", summary="Index chunk records into FAMILY, as `ragstore index`.")
    async def index_chunks(family: str, body: IndexBody, store: Caller) -> dict[str, Any]:
        report = await store.index(body.records, family)
        return report.as_dict()

    @app.delete(
        "/v1/families/{family}/chunks", summary="Delete chunks of FAMILY by id or package, as `ragstore delete`."
    )
    async def delete_chunks(
        family: str,
        store: Caller,
        id: Annotated[list[str], Query(max_length=MAX_IDS)] = [],  # noqa: B006 (FastAPI copies it)
        package: Annotated[list[str], Query(max_length=MAX_IDS)] = [],  # noqa: B006
        dry_run: bool = False,
    ) -> dict[str, Any]:
        if not id and not package:
            raise InvalidInput("give at least one id or package to delete")
        report = await store.delete(family, ids=id, packages=package, dry_run=dry_run)
        return report.as_dict()

    @app.post(
        "/v1/memory/{agent}/recall", summary="The agent's k records nearest the query, as `ragstore memory recall`."
    )
    async def memory_recall(agent: str, body: RecallBody, store: Caller) -> dict[str, Any]:
        profile = _profile(agent, body.stores)
        result = await store.memory.recall(profile, body.query, body.k)
        return dict(result.to_dict())

    @app.post(
        "/v1/memory/{agent}/compose",
        summary="The agent's composed memory (floors, caps, newest first), as `ragstore memory compose`.",
    )
    async def memory_compose(agent: str, body: ComposeBody, store: Caller) -> dict[str, Any]:
        profile = _profile(agent, body.stores)
        bundle = await store.memory.compose(profile, task_hint=body.task_hint)
        if body.format == "markdown":
            return {"agent": bundle.agent, "bundle_id": bundle.bundle_id, "markdown": bundle.to_markdown()}
        return {**bundle.to_dict(), "bundle_id": bundle.bundle_id}

    @app.post(
        "/v1/context-pack",
        summary="A layered context pack (L0-L7): brief, search hits, agent memory, as `ragstore context-pack`.",
    )
    async def context_pack(body: PackBody, store: Caller) -> dict[str, Any]:
        from ragstore.serve.pack import build_pack

        hits = None
        if body.retrieve is not None:
            r = body.retrieve
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FingerprintVectorsWarning)
                hits = await store.search(
                    r.family,
                    r.query,
                    k=r.k,
                    mode=r.mode,
                    mmr_lambda=r.mmr_lambda,
                    **second_stage(settings, r.rerank, r.rerank_depth, r.hyde),
                )
        memory = body.memory
        profile = _profile(memory.agent, memory.stores) if memory is not None else None
        task_hint = memory.task_hint if memory is not None else None
        return await asyncio.to_thread(build_pack, store.store, body, hits, profile, task_hint)

    @app.post(
        "/v1/memory/{agent}/records", summary="Append records to the agent's memory, as `ragstore memory import`."
    )
    async def memory_records(agent: str, body: RecordsBody, store: Caller) -> dict[str, Any]:
        if any(record.get("agent", agent) != agent for record in body.records):
            raise InvalidInput(f"every record's agent must be {agent!r}, the agent of the path")
        result = await store.memory.add([{**record, "agent": agent} for record in body.records])
        return {"agent": agent, "added": result.added, "existing": result.existing}

    return app


def second_stage(settings: Settings, rerank: str | None, depth: int, hyde: bool) -> dict[str, Any]:
    """The search options of a request's ``rerank`` and ``hyde``: the server's own reranker and HyDE
    client (a request never names an endpoint), or InvalidInput when the server was started without."""
    options: dict[str, Any] = {"rerank": rerank}
    if rerank == "cross":
        if settings.reranker is None:
            raise InvalidInput("rerank cross: this server has no reranker (start ragstore serve with --reranker-url)")
        options.update(reranker=settings.reranker, rerank_depth=depth)
    if hyde:
        if settings.hyde is None:
            raise InvalidInput("hyde: this server has no HyDE endpoint (start ragstore serve with --hyde --hyde-url)")
        options["hyde"] = settings.hyde
    return options


def _profile(agent: str, stores: Sequence[str]) -> Any:
    """The AgentProfile of ``agent`` reading ``stores`` (InvalidInput naming the field when invalid)."""
    from ragstore.memory import AgentProfile

    return _checked(lambda: AgentProfile.model_validate({"agent": agent, "stores": list(stores)}))


def _checked(make: Callable[[], Any]) -> Any:
    """``make()``, its pydantic ValidationError as one InvalidInput line."""
    from pydantic import ValidationError

    try:
        return make()
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidInput(f"field {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


def _openapi_without_422(app: FastAPI) -> None:
    """The document says what the app answers: a bad request is 400 ``{"error": ...}``, never FastAPI's 422."""
    make = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = make()
            for item in doc.get("paths", {}).values():
                for operation in item.values():
                    operation.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                doc.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _validation_line(exc: RequestValidationError) -> str:
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ())[1:]) or "request"
    kind = first.get("loc", ("body",))[0]
    return f"{kind} field {where}: {first.get('msg', 'invalid')}"


def _handlers(app: FastAPI) -> None:
    @app.exception_handler(Unauthorized)
    async def unauthorized(request: Request, exc: Unauthorized) -> JSONResponse:
        return error(401, "unauthorized", {"WWW-Authenticate": "Bearer"})

    @app.exception_handler(RagstoreError)
    async def ragstore_error(request: Request, exc: RagstoreError) -> JSONResponse:
        return error(status_of(exc), str(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(400, _validation_line(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        return error(500, f"internal error: {type(exc).__name__}")


class BodyLimit:
    """Refuses a request body over ``limit`` bytes with 413: by its Content-Length before the app runs, or,
    sent in chunks, when the app reads past the limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and (not value.isdigit() or int(value) > self.limit):
                response = error(413, f"the request body is over {self.limit} bytes")
                await response(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, limited, send)


def asgi_app(settings: Settings) -> ASGIApp:
    """The app behind its body-size limit: what ``ragstore serve`` runs."""
    return BodyLimit(create_app(settings), settings.max_body)
