"""The embedding cache: a vector per (model key, sha256 of the text), in ``ragstore.embedding_cache``.

The writer behind ``ragstore index`` and the family migration ask the cache before they call a backend
and fill it after, so the same text is never embedded twice for the same model: re-indexing a renamed
file, or migrating a family to a model and back, costs no embedding call.

The key is :func:`cache_key`: ``"<backend>:<model>:<dim>"``, and for a backend behind an HTTP endpoint
``"<backend>:<model>:<dim>@<endpoint>"`` (scheme, host, port and path; never the user name, password,
query or fragment). The dimension is part of it because a provider's ``dimensions`` setting changes the
vectors of one model name; the endpoint because two providers serving one model name (a gateway and a
local server, two fine-tunes under one name) make different vectors: each family calls its own.
The column is an unconstrained ``vector``, so one table serves every dimension up to pgvector's 16,000;
a ``halfvec`` family caches the full float32 vector and casts it to ``halfvec`` when it stores it.

The ``offline`` backend skips the cache (:func:`uses_cache`): its fingerprint is computed faster than a
round trip fetches it. Vectors supplied with a record are never cached (their origin is the caller's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import numpy as np
from psycopg import sql

from ragstore.db.connection import Conn, db_errors
from ragstore.db.sqlfiles import query
from ragstore.embed.base import Backend, Matrix

EmbedFn = Callable[[list[str]], Matrix]

#: Backends whose vectors are not cached: the offline fingerprint costs less to recompute than to look up;
#: external vectors come from a model ragstore knows by name only, which it cannot vouch for.
UNCACHED_BACKENDS = frozenset({"offline", "external"})


def endpoint_identity(base_url: str) -> str:
    """``base_url`` without credentials, query or fragment, its scheme and host lowercased and the path's
    trailing slashes dropped: ``https://user:pw@API.example/v1/`` -> ``https://api.example/v1``."""
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return f"{parts.scheme.lower()}://{netloc}{parts.path.rstrip('/')}"


def key_for(backend: str, model: str, dim: int, base_url: str | None = None) -> str:
    """The cache key of an embedding space: ``backend:model:dim``, ``@endpoint`` appended when the vectors
    come from an HTTP endpoint."""
    key = f"{backend}:{model}:{dim}"
    return key if not base_url else f"{key}@{endpoint_identity(base_url)}"


def cache_key(backend: Backend) -> str:
    """The cache's model key for ``backend`` (see :func:`key_for`); the endpoint is its ``base_url``."""
    base_url = getattr(backend, "base_url", None)
    return key_for(backend.name, backend.model, backend.dim, base_url if isinstance(base_url, str) else None)


def uses_cache(backend: Backend) -> bool:
    """False for backends cheaper to run than to look up (``offline``), True for the others."""
    return backend.name not in UNCACHED_BACKENDS


def lookup(conn: Conn, key: str, digests: Sequence[bytes]) -> dict[bytes, Matrix]:
    """The cached vectors among ``digests`` for model ``key``, by digest (absent ones are missing).

    Runs in the caller's transaction; raises DatabaseUnavailable / SchemaError (not migrated).
    """
    if not digests:
        return {}
    found: dict[bytes, Matrix] = {}
    with db_errors(), conn.cursor(binary=True) as cur:
        cur.execute(query("cache", "lookup"), {"model": key, "digests": list(digests)})
        for digest, vector in cur:
            found[bytes(digest)] = np.asarray(vector.to_numpy(), dtype=np.float32)
    return found


def store(conn: Conn, key: str, digests: Sequence[bytes], matrix: Matrix) -> None:
    """Add the rows of ``matrix`` under model ``key`` and their ``digests`` (existing keys are kept).

    Runs in the caller's transaction: the rows are there once the caller commits.
    """
    if not digests:
        return
    with db_errors(), conn.cursor() as cur:
        cur.execute(query("cache", "create_stage"))
        with cur.copy(query("cache", "copy_stage")) as copy:
            copy.set_types(["bytea", "vector"])
            for digest, row in zip(digests, matrix, strict=True):
                copy.write_row((digest, row))
        cur.execute(query("cache", "merge_stage"), {"model": key})
        cur.execute("TRUNCATE ragstore_stage_cache")


def embed_cached(
    conn: Conn,
    backend: Backend,
    texts: Sequence[str],
    digests: Sequence[bytes],
    *,
    embed: EmbedFn | None = None,
) -> tuple[Matrix, int]:
    """Vectors for ``texts`` (``digests[i]`` is the sha256 of ``texts[i]``) and how many the backend made.

    Cached vectors are reused; the others go to ``embed`` (default ``backend.embed``; pass one that also
    checks the matrix) in one call, then into the cache. Texts repeated within the call are embedded
    once. Cache reads and writes run in the caller's transaction and are committed by the caller.
    Backends :func:`uses_cache` says no to go straight to ``embed``. Errors: whatever ``embed`` raises,
    DatabaseUnavailable.
    """
    run = embed if embed is not None else (lambda batch: backend.embed(batch))
    if len(texts) != len(digests):
        raise ValueError("texts and digests differ in length")
    if not texts:
        return np.empty((0, backend.dim), dtype=np.float32), 0
    if not uses_cache(backend):
        return run(list(texts)), len(texts)
    key = cache_key(backend)
    found = lookup(conn, key, digests)
    missing: dict[bytes, int] = {}
    for i, digest in enumerate(digests):
        if digest not in found and digest not in missing:
            missing[digest] = i
    out = np.empty((len(texts), backend.dim), dtype=np.float32)
    if missing:
        fresh = run([texts[i] for i in missing.values()])
        new_digests = list(missing)
        store(conn, key, new_digests, fresh)
        found.update(zip(new_digests, fresh, strict=True))
    for i, digest in enumerate(digests):
        out[i] = found[digest]
    return out, len(missing)


def seed_from_family(conn: Conn, key: str, table: str, row_model: str) -> int:
    """Copy a family table's vectors (rows made by ``row_model``) into the cache under ``key``.

    Returns the number of new cache rows; runs in the caller's transaction.
    """
    statement = sql.SQL(query("cache", "seed_from_family")).format(table=sql.Identifier(table))
    with db_errors():
        cur = conn.execute(statement, {"model": key, "row_model": row_model})
    return max(cur.rowcount, 0)


def seed_from_positional_ids(conn: Conn, key: str, family: str, table: str, row_model: str, packages: list[str]) -> int:
    """Copy the vectors of ``packages``' chunks still stored under positional ids (``<package>#<n>``) into
    the cache under ``key``, so that moving those documents to content-anchored ids embeds nothing.

    Returns the number of new cache rows; runs in the caller's transaction.
    """
    if not packages:
        return 0
    statement = sql.SQL(query("cache", "seed_from_positional_ids")).format(table=sql.Identifier(table))
    params = {"model": key, "family": family, "row_model": row_model, "packages": packages}
    with db_errors():
        cur = conn.execute(statement, params)
    return max(cur.rowcount, 0)
