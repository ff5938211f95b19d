"""Embedding families: one backend + model + dimension, each with its own table ``ragstore.emb_<name>``.

A family name is ``[a-z][a-z0-9_]{0,47}`` and reaches SQL only through ``psycopg.sql.Identifier``.
The family table holds ``embedding vector(<dim>)`` (``halfvec`` above pgvector's 2,000-dimension HNSW
limit for ``vector``, up to 4,000) with an HNSW ``*_cosine_ops`` index.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt
import psycopg
from pgvector import HalfVector, Vector
from psycopg import sql
from psycopg.types.json import Jsonb

from ragstore.db import citus
from ragstore.db.connection import Conn, db_errors
from ragstore.db.dialect import dialect_of
from ragstore.db.sqlfiles import query
from ragstore.db.sync_triggers import drop_family_triggers
from ragstore.embed.base import Backend
from ragstore.errors import Conflict, InvalidInput, ModelMismatch, NotFound, mask_secrets
from ragstore.families import build_memory
from ragstore.families import storage as storages

if TYPE_CHECKING:
    from ragstore.caches import Caches

NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,47}")
HNSW_MAX_DIM = {"vector": 2000, "halfvec": 4000}
# HNSW build parameters; ef_search is chosen at query time. m is pgvector's default; ef_construction is
# twice its default: a denser graph is what lets a filtered iterative scan reach recall@10 >= 0.99 at the
# default ef_search (benchmarks/query.py, 10% filter, ef_construction 64 -> 128: 1M x 16-d .977-.988 ->
# .990-.999, 100k x 384-d .969-.989 -> .995; ranges over builds) for a build 1.4x (100k) to 1.6x (1M) longer.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
# The full-text configuration of a family that names none, and the form of a configuration name.
DEFAULT_FTS_CONFIG = "english"
FTS_CONFIG_NAME = re.compile(r"[a-z_][a-z0-9_]*")
# The family option holding the declared filter keys (ragstore.families.filter_keys).
FILTER_KEYS_OPTION = "filter_keys"


# -- hybrid fusion settings ------------------------------------------------------------------------
FUSIONS = ("rrf", "cc")
NORMALIZATIONS = ("minmax", "zscore", "tmm")
MAX_PER_LEG = 1000  # pgvector's ef_search bound


@dataclass(frozen=True, slots=True)
class FusionSettings:
    """One way to fuse: the kind, the normalisation and dense weight (cc), rrf_k (rrf), the depth per leg."""

    fusion: str = "cc"
    normalization: str = "tmm"
    alpha: float = 0.8
    per_leg: int = 20
    rrf_k: int = 60

    def checked(self) -> FusionSettings:
        """The settings, or InvalidInput naming the bad field."""
        if self.fusion not in FUSIONS:
            raise InvalidInput(f"fusion must be one of {', '.join(FUSIONS)}, got {self.fusion!r}")
        if self.normalization not in NORMALIZATIONS:
            raise InvalidInput(f"normalization must be one of {', '.join(NORMALIZATIONS)}, got {self.normalization!r}")
        alpha = self.alpha
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 <= float(alpha) <= 1.0:
            raise InvalidInput(f"alpha (the dense weight) must be a number from 0 to 1, got {alpha!r}")
        for name, value, top in (("per_leg", self.per_leg, MAX_PER_LEG), ("rrf_k", self.rrf_k, None)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (top and value > top):
                bound = f" from 1 to {top}" if top else ""
                raise InvalidInput(f"{name} must be a positive integer{bound}, got {value!r}")
        return replace(self, alpha=float(alpha))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def label(self) -> str:
        if self.fusion == "rrf":
            return f"rrf(k={self.rrf_k},n={self.per_leg})"
        return f"cc-{self.normalization}(a={self.alpha:g},n={self.per_leg})"


# How a hybrid search fuses its legs: the family option "fusion" (``ragstore family tune``), read with the
# record (:attr:`Family.fusion`); the numpy reference is ragstore.search.fusion. The untuned default, chosen
# on three corpora (benchmarks/README.md, "Retrieval quality and hybrid latency").
DEFAULT_FUSION = FusionSettings()


def settings_of(options: Mapping[str, Any] | None) -> FusionSettings:
    """The fusion settings a family stores under option ``"fusion"`` (the default when it has none).

    Raises InvalidInput when the stored value is not a valid settings object (a hand-edited registry).
    """
    stored = (options or {}).get("fusion")
    if stored is None:
        return DEFAULT_FUSION
    if not isinstance(stored, Mapping):
        raise InvalidInput(f"the family's fusion option must be an object, got {stored!r}")
    known = set(FusionSettings.__dataclass_fields__)
    unknown = sorted(set(stored) - known)
    if unknown:
        raise InvalidInput(f"the family's fusion option has unknown keys: {', '.join(unknown)}")
    return replace(DEFAULT_FUSION, **dict(stored)).checked()


def listed(options: dict[str, Any], option: str) -> tuple[str, ...]:
    """The texts of the list option ``option`` of a family's ``options`` (none when it is not a list)."""
    raw = options.get(option)
    return tuple(k for k in raw if isinstance(k, str)) if isinstance(raw, list) else ()


class _TableSuffix:
    """A read-only attribute of a :class:`Family`: ``<its table>_<suffix>`` (the name of one of its indexes)."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    @overload
    def __get__(self, family: None, owner: type[Family]) -> _TableSuffix: ...

    @overload
    def __get__(self, family: Family, owner: type[Family] | None = None) -> str: ...

    def __get__(self, family: Family | None, owner: type[Family] | None = None) -> str | _TableSuffix:
        return self if family is None else f"{family.table}_{self.suffix}"


@dataclass(frozen=True)
class Family:
    name: str
    backend: str
    model: str
    dim: int
    vector_type: str
    table: str
    state: str
    options: dict[str, Any]

    # The family's indexes, named after its table.
    hnsw_index = _TableSuffix("embedding_hnsw")
    package_index = _TableSuffix("package_path")
    metadata_index = _TableSuffix("metadata")

    @property
    def view(self) -> str:
        """The family's stable SQL name in schema ragstore, ``vectors_<name>`` (see :func:`create_view`); at
        most 56 bytes, within PostgreSQL's 63 (a name has at most 48)."""
        return f"vectors_{check_name(self.name)}"

    # What a search reads of the family's options, read here, with the record: the statement of every mode
    # takes these facts from the Family it runs on, never from the options again.
    @property
    def storage(self) -> str:
        """How the HNSW index holds the vectors: vector, halfvec or bit (ragstore.families.storage); ``vector``
        when the options record none (every family made before storages)."""
        value = self.options.get("storage", "vector")
        return value if value in storages.STORAGES else "vector"

    @property
    def rerank_factor(self) -> int:
        """For the bit storage: how many candidates per hit the index returns for the exact re-rank."""
        value = self.options.get("rerank_factor", storages.DEFAULT_RERANK_FACTOR)
        ok = isinstance(value, int) and 1 <= value <= storages.MAX_RERANK_FACTOR
        return value if ok else storages.DEFAULT_RERANK_FACTOR

    def candidates(self, k: int) -> int:
        """How many rows a search reads from the index for ``k`` hits: ``k``, or ``k × rerank_factor`` for
        ``bit`` (re-ranked exactly), capped at 1,000 (hnsw.ef_search's bound) but never under ``k``."""
        if self.storage != "bit":
            return k
        return max(k, min(k * self.rerank_factor, 1000))

    @property
    def filter_keys(self) -> tuple[str, ...]:
        """The metadata keys declared on the family (sorted; :mod:`ragstore.families.filter_keys`): a
        search renders conditions on them with the expression their btree indexes."""
        return tuple(sorted(listed(self.options, FILTER_KEYS_OPTION)))

    @property
    def fts_config(self) -> str:
        """The text-search configuration of the family (option ``fts_config``, default
        :data:`DEFAULT_FTS_CONFIG`); InvalidInput when the option is not a plain configuration name."""
        config = self.options.get("fts_config", DEFAULT_FTS_CONFIG)
        if not isinstance(config, str) or not FTS_CONFIG_NAME.fullmatch(config):
            raise InvalidInput(f"family {self.name!r} has an invalid fts_config option {config!r}")
        return config

    @property
    def fusion(self) -> FusionSettings:
        """How a hybrid search on the family fuses its legs: the settings ``family tune`` stored (option
        ``fusion``), else :data:`DEFAULT_FUSION`; InvalidInput for a stored value that is not one."""
        return settings_of(self.options)

    def as_dict(self) -> dict[str, Any]:
        """The family as JSON data (``--json``, the HTTP API): a password in any option shown as ``***``."""
        return {
            "name": self.name,
            "backend": self.backend,
            "model": self.model,
            "dim": self.dim,
            "vector_type": self.vector_type,
            "storage": self.storage,
            "table": f"ragstore.{self.table}",
            "state": self.state,
            "options": _masked(self.options),
        }

    @property
    def opclass(self) -> str:
        return storages.opclass(self.storage, self.vector_type)

    def index_expression(self) -> str:
        """What the HNSW index is built on (constant text of checked parts)."""
        return storages.index_expression(self.storage, self.vector_type, self.dim)

    def identifiers(self) -> dict[str, sql.Composable]:
        """The names this family puts into SQL, each an Identifier (or a checked keyword)."""
        return {
            "table": sql.Identifier(self.table),
            "view": sql.Identifier(self.view),
            "family": sql.Literal(check_name(self.name)),
            "hnsw_index": sql.Identifier(self.hnsw_index),
            "package_index": sql.Identifier(self.package_index),
            "metadata_index": sql.Identifier(self.metadata_index),
            "vector_type": sql.SQL(f"{self.vector_type}({int(self.dim)})"),  # checked in vector_type_for
            "opclass": sql.SQL(self.opclass),
            "index_expression": sql.SQL(self.index_expression()),  # checked in ragstore.families.storage
            "m": sql.Literal(HNSW_M),
            "ef_construction": sql.Literal(HNSW_EF_CONSTRUCTION),
        }

    def query_param(self, vector: npt.NDArray[np.float32]) -> Vector | HalfVector:
        """The query ``vector`` as the pgvector value the family's column compares with."""
        return HalfVector(vector) if self.vector_type == "halfvec" else Vector(vector)

    def check_backend(self, backend: Backend) -> None:
        """Refuse a backend from another embedding space than this family's (ModelMismatch)."""
        if (backend.name, backend.model, backend.dim) != (self.backend, self.model, self.dim):
            raise ModelMismatch(
                f"family {self.name!r} holds {self.backend}/{self.model} ({self.dim}-d) vectors, not "
                f"{backend.name}/{backend.model} ({backend.dim}-d); to change its model run "
                f"`ragstore family migrate {self.name} --backend {backend.name}`"
            )


def _masked(value: Any) -> Any:
    """``value`` with a password in any URL (e.g. ``base_url``) or DSN among its strings shown as ``***``."""
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return value


def check_name(name: str) -> str:
    """Return ``name`` when it is a valid family name, else raise InvalidInput saying why."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidInput(
            f"invalid family name {name!r}: use a lowercase letter, then up to 47 lowercase letters, "
            "digits or underscores"
        )
    return name


def vector_type_for(dim: int) -> str:
    """``vector`` up to 2,000 dimensions, ``halfvec`` up to 4,000 (pgvector's HNSW limits)."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise InvalidInput(f"invalid dimension {dim!r}: must be a positive integer")
    if dim <= HNSW_MAX_DIM["vector"]:
        return "vector"
    if dim <= HNSW_MAX_DIM["halfvec"]:
        return "halfvec"
    raise InvalidInput(
        f"dimension {dim} is over pgvector's HNSW limit (2,000 for vector, 4,000 for halfvec); "
        "use a model or a `dimensions` setting at or under 4,000"
    )


# Family options that are not the backend's settings: the full-text configuration, a model migration's
# target, the hybrid fusion chosen by `family tune`, the declared filter keys (ragstore.families.filter_keys),
# the index storage and its re-rank factor and last measured recall (ragstore.families.storage).
NOT_BACKEND_OPTIONS = frozenset(
    {
        "fts_config",
        "target",
        "fusion",
        "filter_keys",
        "filter_keys_covering",
        "storage",
        "rerank_factor",
        "recall",
        "storage_target",
        "title_prefix",
    }
)
#: Whether a document's chunks start with their title and heading path in the embedded text, when the
#: family does not say (option ``title_prefix``; docs/decisions.md, "The title prefix is a family setting").
DEFAULT_TITLE_PREFIX = False


def title_prefix_of(family: Family) -> bool:
    """The family option ``title_prefix`` (:data:`DEFAULT_TITLE_PREFIX` when unset): whether its document
    chunks are embedded with their ``Title > Heading`` path as the first line."""
    value = family.options.get("title_prefix", DEFAULT_TITLE_PREFIX)
    if not isinstance(value, bool):
        raise InvalidInput(f"family {family.name!r} has an invalid title_prefix option {value!r}: true or false")
    return value


def backend_options(family: Family) -> dict[str, Any]:
    """The settings ``family`` recorded for its backend (``base_url``, ``dimensions``, ...)."""
    return {k: v for k, v in family.options.items() if k not in NOT_BACKEND_OPTIONS}


def backend_for(family: Family, caches: Caches | None = None) -> Backend:
    """The backend that built ``family``, configured from the options the family recorded.

    Backends are kept in ``caches`` per configuration (a search must not pay for a new model session or
    HTTP client, tens of milliseconds, on every query); without ``caches`` a new one is made.
    """
    from ragstore.embed.registry import make_backend

    options = backend_options(family)
    key = json.dumps([family.backend, family.model, family.dim, options], sort_keys=True, default=str)

    def make() -> Backend:
        backend = make_backend(family.backend, model=family.model, dim=family.dim, **options)
        family.check_backend(backend)
        return backend

    return make() if caches is None else caches.backend(key, make)


def row_to_family(row: tuple[Any, ...]) -> Family:
    """A row of the ``get_family``/``list_families`` blocks as a Family."""
    name, backend, model, dim, vector_type, table, state, options = row
    return Family(name, backend, model, int(dim), vector_type, table, state, dict(options or {}))


def create_family(
    conn: Conn,
    name: str,
    backend: Backend,
    *,
    options: dict[str, Any] | None = None,
    table: str | None = None,
) -> Family:
    """Register family ``name`` for ``backend`` and create its table and indexes, in one transaction.

    Raises InvalidInput (name, dimension, a full-text configuration the database lacks), Conflict (the
    family exists).
    """
    check_name(name)
    vector_type = vector_type_for(backend.dim)
    options = dict(options or {})
    if "storage" in options:
        storages.check_storage(options["storage"], backend.dim, vector_type)
    if "rerank_factor" in options:
        storages.check_rerank_factor(options["rerank_factor"])
    if not isinstance(options.get("title_prefix", False), bool):
        raise InvalidInput(f"title_prefix must be true or false, not {options['title_prefix']!r}")
    family = Family(
        name=name,
        backend=backend.name,
        model=backend.model,
        dim=backend.dim,
        vector_type=vector_type,
        table=table or f"emb_{name}",
        state="ready",
        options=dict(options or {}),
    )
    try:
        with conn.transaction(), db_errors():
            if "fts_config" in family.options:
                check_fts_config(conn, family.options["fts_config"])
            conn.execute(
                query("families", "insert_family"),
                {
                    "name": family.name,
                    "backend": family.backend,
                    "model": family.model,
                    "dim": family.dim,
                    "vector_type": family.vector_type,
                    "table_name": family.table,
                    "options": Jsonb(family.options),
                },
            )
            create_table(conn, family)
    except psycopg.errors.UniqueViolation as exc:
        raise Conflict(f"family {name!r} exists already") from exc
    except Exception as exc:
        if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
            raise Conflict(f"family {name!r} exists already") from exc
        raise
    return family


_CONFIG_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_fts_config(conn: Conn, config: object) -> str:
    """``config`` when it names a text-search configuration of this database (``english``, ``simple``,
    ...), else InvalidInput: a family whose chunks cannot be indexed must not be created."""
    if not isinstance(config, str) or not _CONFIG_NAME.fullmatch(config):
        raise InvalidInput(f"invalid full-text configuration {config!r}: use a name such as english or simple")
    with db_errors():
        row = conn.execute(query("families", "fts_config_exists"), {"config": config}).fetchone()
    if not row or not row[0]:
        raise InvalidInput(
            f"no text search configuration named {config!r} in this database "
            "(see SELECT cfgname FROM pg_ts_config; english and simple always exist)"
        )
    return config


def create_table(conn: Conn, family: Family) -> None:
    """Create the family's table, its package btree, its metadata GIN index and its HNSW index (inside the
    caller's transaction)."""
    ids = family.identifiers()
    for block in ("create_table", "create_package_index", "create_metadata_index", "create_hnsw_index"):
        conn.execute(sql.SQL(query("families", block)).format(**ids))
    if dialect_of(conn).lays_out:
        # On Citus the table is distributed on chunk_id, co-located with ragstore.chunks (its shards and
        # their indexes are created on the workers, in this transaction).
        citus.distribute_family(conn, family.table)
    give_table_to_owner(conn, family)
    create_view(conn, family)


def create_view(conn: Conn, family: Family) -> None:
    """Create, or re-point at the family's current table, its view ``ragstore.vectors_<name>`` (``create_view``
    in ragstore/sql/families.sql), owned by ``ragstore_owner`` and readable by the app and reader roles, inside
    the caller's transaction: the stable name hand-written SQL uses, whatever model migrations did. Not on
    Citus (docs/guide/citus.md): there, read the table name from ``ragstore.families``."""
    if not dialect_of(conn).family_views:
        return
    ids = family.identifiers()
    conn.execute(sql.SQL(query("families", "create_view")).format(**ids))
    row = conn.execute(query("roles", "owner_transfer"), {"table": family.view}).fetchone()
    if row is not None and row[0] and row[1]:
        conn.execute(sql.SQL(query("roles", "give_view_to_owner")).format(**ids))
    exists = conn.execute(query("roles", "group_roles_exist")).fetchone()
    if exists and exists[0]:
        conn.execute(sql.SQL(query("roles", "grant_view")).format(**ids))


def give_table_to_owner(conn: Conn, family: Family) -> None:
    """Make ``ragstore_owner`` the owner of the family's new table and grant the app and reader their rights.

    A table belongs to whoever created it (a superuser, a deployer): given to ``ragstore_owner`` here, every
    member of the owner role can maintain it, and the bulk-load functions (SECURITY DEFINER, owned by
    ``ragstore_owner``) can drop and build its index. Skipped when the roles do not exist or the creator
    may not act as ``ragstore_owner``. Runs inside the caller's transaction.
    """
    ids = {"table": sql.Identifier(family.table)}
    row = conn.execute(query("roles", "owner_transfer"), {"table": family.table}).fetchone()
    if row is None or not row[1]:
        return
    if row[0]:
        conn.execute(sql.SQL(query("roles", "give_table_to_owner")).format(**ids))
    exists = conn.execute(query("roles", "group_roles_exist")).fetchone()
    if exists and exists[0]:
        conn.execute(sql.SQL(query("roles", "grant_table_to_app")).format(**ids))
        conn.execute(sql.SQL(query("roles", "grant_table_to_reader")).format(**ids))


def get_family(conn: Conn, name: str) -> Family:
    """The family called ``name``; NotFound when there is none."""
    check_name(name)
    with db_errors():
        row = conn.execute(query("families", "get_family"), {"name": name}).fetchone()
    if row is None:
        raise family_not_found(name)
    return row_to_family(row)


def family_not_found(name: str) -> NotFound:
    """The error of a lookup of family ``name`` that found none."""
    return NotFound(f"no family named {name!r} (see `ragstore family list`)")


def list_families(conn: Conn) -> list[Family]:
    with db_errors():
        rows = conn.execute(query("families", "list_families")).fetchall()
    return [row_to_family(r) for r in rows]


@dataclass(frozen=True)
class FamilyStats:
    family: Family
    rows: int
    total_bytes: int
    hnsw_index: str | None
    hnsw_bytes: int | None


def family_stats(conn: Conn, name: str) -> FamilyStats:
    family = get_family(conn, name)
    statement = sql.SQL(query("families", "family_stats")).format(**family.identifiers())
    with db_errors():
        row = conn.execute(statement, {"table_name": family.table}).fetchone()
    assert row is not None
    rows, total, index, index_bytes = row
    return FamilyStats(family, int(rows), int(total), index, None if index_bytes is None else int(index_bytes))


def missing_vector(family: Family) -> str:
    """Why a record without a vector cannot go into ``family`` of the ``external`` backend."""
    return (
        f"missing; family {family.name!r} uses the external backend ({family.model}, {family.dim}-d), "
        "which embeds nothing: every record needs its vector"
    )


def drop_family(conn: Conn, name: str) -> None:
    """Remove the family, its table (and the table a model migration was building) and its chunks, in one
    transaction. Other families' rows are never touched: each family holds its own chunks."""
    family = get_family(conn, name)
    target = family.options.get("target")
    tables = [family.table]
    if isinstance(target, dict) and isinstance(target.get("table"), str):
        tables.append(target["table"])
    with conn.transaction(), db_errors():
        lock_term_df_shared(conn, name)
        drop_family_triggers(conn, name)  # the followed tables' triggers; sources and queue cascade
        conn.execute(sql.SQL(query("families", "drop_view")).format(**family.identifiers()))
        for table in tables:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS ragstore.{table}").format(table=sql.Identifier(table)))
        conn.execute(query("families", "delete_family"), {"name": name})


def lock_term_df_shared(conn: Conn, family: str) -> None:
    """Before a statement that deletes ``family``'s chunks, in its transaction: the delete trigger's updates
    of the words' document counts are one sorted sequence, which cannot deadlock with another, but can with
    a merge that both inserts and updates chunks (two sequences), which takes this lock alone
    (``term_df_lock_shared`` in ragstore/sql/ingest.sql). Not on Citus, whose writers do not take it."""
    if dialect_of(conn).term_df_lock:
        conn.execute(query("ingest", "term_df_lock_shared"), {"family": family})


@contextlib.contextmanager
def deleting(conn: Conn, family: str) -> Iterator[None]:
    """A transaction for statements that delete ``family``'s chunks (a prune, ``ragstore delete``, the
    adapters' deletes), psycopg errors mapped: the shared df lock first (:func:`lock_term_df_shared`), then
    whatever the block runs, committed whole or not at all."""
    with db_errors(), conn.transaction():
        lock_term_df_shared(conn, family)
        yield


def _lock_index_ddl(conn: Conn, family: Family) -> None:
    """Serialise drops and builds of one family's HNSW index (two bulk loads must not collide)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('ragstore.hnsw.' || %s, 0))", (family.table,))


def has_hnsw_index(conn: Conn, family: Family) -> bool:
    """Whether the family table has its HNSW index (an interrupted bulk load can leave it missing)."""
    with db_errors():
        row = conn.execute(
            "SELECT to_regclass(format('ragstore.%%I', %s::text)) IS NOT NULL", (family.hnsw_index,)
        ).fetchone()
    return bool(row and row[0])


def may_own(conn: Conn, family: Family) -> bool:
    """Whether this session has the privileges of the family table's owner (else: the definer functions)."""
    row = conn.execute(query("roles", "may_own_table"), {"table": family.table}).fetchone()
    return bool(row and row[0])


def build_settings(conn: Conn, family: Family, *, work: str = "hnsw") -> dict[str, str]:
    """``maintenance_work_mem`` and ``max_parallel_maintenance_workers`` for building the family's HNSW index
    (``work`` "hnsw": its rows, as the planner counts them or counted) or clustering its table ("cluster":
    its bytes), by the rule of :mod:`ragstore.families.build_memory`."""
    row = conn.execute(query("families", "build_size"), {"table": family.table}).fetchone()
    rows, table_bytes = (row[0], row[1]) if row else (None, 0)
    if work == "cluster":
        need = int(table_bytes or 0)
    else:
        if rows is None:
            counted = conn.execute(sql.SQL(query("families", "count_rows")).format(**family.identifiers())).fetchone()
            rows = counted[0] if counted else 0
        need = build_memory.hnsw_need(int(rows), family.storage, family.vector_type, family.dim)
    workers = build_memory.parallel_workers()
    return {
        "memory": build_memory.setting(build_memory.maintenance_bytes(need, workers=workers)),
        "workers": str(workers),
    }


def size_build(conn: Conn, family: Family, *, work: str = "hnsw", local: bool = True) -> dict[str, str]:
    """Set :func:`build_settings` for this transaction (``local``) or this session (then reset them with
    :func:`reset_build`); returns them."""
    chosen = build_settings(conn, family, work=work)
    conn.execute(query("families", "set_build_settings"), {**chosen, "is_local": local})
    return chosen


def reset_build(conn: Conn) -> None:
    """The server's build settings again for this session (after :func:`size_build` with ``local=False``)."""
    conn.execute(query("families", "reset_build_settings"))


def ensure_hnsw_index(conn: Conn, family: Family) -> None:
    """Build the HNSW index when missing (after a bulk load), with build memory and workers sized for its rows
    for this transaction (:func:`size_build`).

    A role that does not own the table (the app) goes through ``ragstore.family_build_hnsw``, which builds
    the same index as its owner (SECURITY DEFINER, the family found by name in the registry) with the
    caller's settings.
    """
    with conn.transaction(), db_errors():
        _lock_index_ddl(conn, family)
        size_build(conn, family)
        if not may_own(conn, family):
            dialect_of(conn).registry_then_shards(conn)
            conn.execute(query("roles", "build_hnsw"), {"family": family.name})
            return
        conn.execute(sql.SQL(query("families", "create_hnsw_index")).format(**family.identifiers()))


def cluster_by_package(conn: Conn, family: Family) -> None:
    """Rewrite the family table in package_path order and refresh its statistics.

    Done after a bulk load into an empty family, before the HNSW build: rows of one package then sit on
    contiguous pages, so a package-filtered exact search reads a few pages instead of one per row
    (0.73 ms against 3.7 ms at 1% of 100k×384: docs/decisions.md, "Clustering by package"). Rows written
    later append at the end.
    """
    with conn.transaction(), db_errors():
        _lock_index_ddl(conn, family)
        size_build(conn, family, work="cluster")
        if not may_own(conn, family):  # the app: ragstore.family_bulk_cluster clusters and analyzes
            dialect_of(conn).registry_then_shards(conn)
            conn.execute(query("roles", "bulk_cluster"), {"family": family.name})
            return
        conn.execute(sql.SQL(query("families", "cluster_by_package")).format(**family.identifiers()))
    with conn.transaction(), db_errors():
        conn.execute(sql.SQL(query("families", "analyze_table")).format(**family.identifiers()))


def drop_hnsw_index(conn: Conn, family: Family) -> bool:
    """Drop the family's HNSW index for a bulk load; True when it is gone.

    A role that does not own the table (the app) goes through ``ragstore.family_bulk_drop_hnsw``, which
    drops it only while the family's table is empty (returns False otherwise).
    """
    with conn.transaction(), db_errors():
        _lock_index_ddl(conn, family)
        if not may_own(conn, family):
            dialect_of(conn).registry_then_shards(conn)
            row = conn.execute(query("roles", "bulk_drop_hnsw"), {"family": family.name}).fetchone()
            return bool(row and row[0])
        conn.execute(sql.SQL(query("families", "drop_hnsw_index")).format(**family.identifiers()))
    return True
