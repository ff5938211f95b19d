"""``ragstore mcp --transport http``: the same tools over the SDK's streamable HTTP transport, under uvicorn.

Two ways to decide the database role a call runs as:

- without tokens, every call runs as the DSN's role, as over stdio; the server then listens on a loopback
  address only (anyone who can reach the port acts as that role), which the CLI enforces;
- with ``--tokens``, every HTTP request carries ``Authorization: Bearer <token>`` of ``ragstore token create``
  (:mod:`ragstore.serve.tokens`): :class:`BearerTokens` answers a missing, malformed, unknown or revoked token
  with a bare 401 before the MCP layer sees the request, and the tools then run on a :class:`~ragstore.Store`
  whose connections start as the token's role (``-c role=...``), so the reader/app/owner grants and the
  memory row-level security hold per token. The DSN's role (the login) reads the tokens table, so it is a
  member of ``ragstore_owner``, and must be allowed to ``SET ROLE`` to each token's role.

The SDK's DNS-rebinding protection (Host and Origin checked) is on for a loopback host.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import psycopg
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ragstore.db.connection import map_db_error
from ragstore.db.sqlfiles import query
from ragstore.errors import DatabaseUnavailable, PermissionDenied
from ragstore.mcpserver.server import build_server
from ragstore.search.rerank import HttpReranker
from ragstore.serve import tokens
from ragstore.store import Store

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PATH = "/mcp"
ROLE_KEY = "ragstore_role"  # where BearerTokens leaves the token's role, in the ASGI scope's state
MAX_ROLES = 16  # distinct token roles one server keeps a pool for
_role: contextvars.ContextVar[str | None] = contextvars.ContextVar("ragstore_mcp_role", default=None)


def role_dsn(dsn: str, role: str) -> str:
    """``dsn`` whose sessions start as ``role`` (``-c role=...`` in its options, escaped as libpq reads them)."""
    escaped = role.replace("\\", "\\\\").replace(" ", "\\ ")
    options = str(conninfo_to_dict(dsn).get("options") or "")
    return make_conninfo(dsn, options=f"{options} -c role={escaped}".strip())


class RoleStores:
    """The login's Store, and one Store per token role, opened on first use (from the tools' threads)."""

    def __init__(self, dsn: str, pool_size: int = 2) -> None:
        self.dsn = dsn
        self.pool_size = pool_size
        self.login = Store(dsn, pool_size=2, timeout=10.0, recover=True)
        self._roles: dict[str, Store] = {}
        self._lock = threading.Lock()

    def current(self) -> Store:
        """The Store of the call at hand's token role. Never the login's: a call without a role is refused."""
        role = _role.get()
        if role is None:
            raise PermissionDenied("permission denied: this request carried no token")
        return self.for_role(role)

    def for_role(self, role: str) -> Store:
        with self._lock:
            store = self._roles.get(role)
            if store is not None:
                return store
            if len(self._roles) >= MAX_ROLES:
                raise DatabaseUnavailable(f"this server serves at most {MAX_ROLES} token roles at once")
            try:
                with self.login.connection() as conn:
                    row = conn.execute(query("serve", "may_act_as"), {"role": role}).fetchone()
            except psycopg.Error as exc:
                map_db_error(exc)
            if row is None or not row[0]:
                raise PermissionDenied(f"permission denied: the server's login role may not act as role {role!r}")
            store = Store(role_dsn(self.dsn, role), pool_size=self.pool_size, timeout=10.0, recover=True)
            self._roles[role] = store
            return store

    def close(self) -> None:
        with self._lock:
            stores, self._roles = list(self._roles.values()), {}
        for store in stores:
            store.close()
        self.login.close()


async def _unauthorized(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
        }
    )
    await send({"type": "http.response.body", "body": b'{"error": "unauthorized"}'})


class BearerTokens:
    """ASGI middleware: a request without a live token of ``ragstore token`` gets a bare 401; one with it goes
    on with the token's role in ``scope["state"]``. Tokens are checked on a connection of the login's."""

    def __init__(self, app: ASGIApp, login_dsn: str) -> None:
        self.app = app
        self.login_dsn = login_dsn

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        role = None
        if scheme.lower() == "bearer" and token.strip():
            try:
                async with await psycopg.AsyncConnection.connect(self.login_dsn, autocommit=True) as conn:
                    role = await tokens.authenticate(conn, token.strip())
            except psycopg.Error:
                await send(
                    {"type": "http.response.start", "status": 503, "headers": [(b"content-type", b"application/json")]}
                )
                await send({"type": "http.response.body", "body": b'{"error": "the database is unavailable"}'})
                return
        if role is None:
            await _unauthorized(send)
            return
        scope.setdefault("state", {})[ROLE_KEY] = role
        await self.app(scope, receive, send)


async def token_role(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """MCP middleware: the call runs with the role BearerTokens found for its HTTP request (the tools' thread
    inherits the context variable)."""
    state = getattr(getattr(ctx, "request", None), "scope", {}).get("state") or {}
    marker = _role.set(state.get(ROLE_KEY))
    try:
        return await call_next(ctx)
    finally:
        _role.reset(marker)


def serve_http(
    dsn: str,
    *,
    host: str,
    port: int,
    allow_writes: bool,
    use_tokens: bool,
    log_level: str = "warning",
    reranker: HttpReranker | None = None,
) -> None:
    """Serve the tools at ``http://host:port/mcp`` until interrupted: as the DSN's role, or with
    ``use_tokens`` as each request's token role."""
    import sys

    import uvicorn

    logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
    stores = RoleStores(dsn)
    try:
        # Fail now, in one line, when the database is unreachable or the login may not read the tokens.
        with stores.login.connection() as conn:
            try:
                if use_tokens:
                    conn.execute(query("tokens", "lookup"), {"id": 0})
                else:
                    conn.execute("SELECT 1")
            except psycopg.Error as exc:
                map_db_error(exc)
        server = build_server(
            stores.current if use_tokens else stores.login,
            allow_writes=allow_writes,
            middleware=[token_role] if use_tokens else [],
            reranker=reranker,
        )
        app: Any = server.streamable_http_app(streamable_http_path=PATH, host=host)
        if use_tokens:
            app = BearerTokens(app, dsn)
        print(f"ragstore mcp: serving http://{host}:{port}{PATH}", file=sys.stderr, flush=True)
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level)).run()
    finally:
        stores.close()
