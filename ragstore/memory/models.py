"""Value types of agent memory: the record, the five stores, an agent's profile and the composition policy.

Everything here is validated at the edge (pydantic v2) and frozen afterwards, so the composer can trust
its inputs. :func:`load_profile` reads an agent profile from a JSON or TOML file and raises
:class:`~ragstore.errors.InvalidInput` naming the file and the field when the file is wrong.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
)

from ragstore.common.files import read_bytes
from ragstore.common.problems import first_problem
from ragstore.common.strictjson import MAX_DEPTH, nesting_depth
from ragstore.errors import InvalidInput

__all__ = [
    "AGENT_ID_PATTERN",
    "ALL_STORES",
    "DEFAULT_POLICY",
    "AgentProfile",
    "CompositionPolicy",
    "MemoryRecord",
    "Store",
    "StoreName",
    "StorePolicy",
    "load_profile",
]

AGENT_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"

StoreName = Literal["episodic", "semantic", "procedural", "decision", "transcript"]


class Store(StrEnum):
    """The five append-only memory stores, in their canonical order."""

    EPISODIC = "episodic"  # what happened
    SEMANTIC = "semantic"  # concepts
    PROCEDURAL = "procedural"  # how-tos
    DECISION = "decision"  # decisions taken
    TRANSCRIPT = "transcript"  # conversations


ALL_STORES: tuple[Store, ...] = tuple(Store)

# Limits the database would otherwise enforce mid-write: (agent, id) is a btree key (entries are capped at
# 2,704 bytes), and the content's stored tsvector must stay under 1 MB (measured on ingest: 3 MB of distinct
# words make a 4.4 MB tsvector; short distinct words cost up to ~3 bytes per byte, so 256 KiB stays under it).
MAX_ID_BYTES = 2048
MAX_CONTENT_BYTES = 256 * 1024

Score = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


def _reject_bool(value: Any) -> Any:
    # pydantic's lax mode turns True into 1.0; a boolean where a score belongs is a mistake in the input.
    if isinstance(value, bool):
        raise ValueError("must be a number in [0, 1], not a boolean")
    return value


def _check_finite(value: JsonValue, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: non-finite number {value!r} has no JSON form")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(item, f"{where}[{index}]")


def _check_text(value: Any) -> None:
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("holds a NUL character, which PostgreSQL cannot store")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("holds a lone surrogate (not valid Unicode text)") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key)
            _check_text(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_text(item)


class MemoryRecord(BaseModel):
    """One immutable memory record.

    Promises: ``at`` is timezone-aware and normalised to UTC (a naive datetime is a validation error);
    ``content`` has a non-blank character; ``salience`` and ``confidence`` are finite and in [0, 1] and
    default to 0.5 (neutral: a record that says nothing about its weight passes every default floor,
    the strictest being semantic confidence >= 0.3); ``metadata`` is JSON with finite numbers only, so
    every record has a canonical JSON form. Raises :class:`pydantic.ValidationError` (a ``ValueError``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Annotated[str, Field(min_length=1)]
    agent: Annotated[str, Field(pattern=AGENT_ID_PATTERN)]
    store: Store
    at: AwareDatetime
    content: str
    salience: Score = 0.5
    confidence: Score = 0.5
    tags: tuple[str, ...] = ()
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("id", "content", "tags", "metadata")
    @classmethod
    def _storable_text(cls, value: Any) -> Any:
        # PostgreSQL text and jsonb hold neither NUL nor lone surrogates (which are not Unicode text):
        # refused here, naming the field, rather than failing in the driver or the server.
        _check_text(value)
        return value

    @field_validator("id")
    @classmethod
    def _id_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("id must not be blank")
        if (size := len(value.encode("utf-8"))) > MAX_ID_BYTES:
            # (agent, id) is a btree key: PostgreSQL caps an index entry at 2,704 bytes.
            raise ValueError(f"id is {size:,} bytes of UTF-8, over the limit of {MAX_ID_BYTES:,}")
        return value

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if len(value) > MAX_CONTENT_BYTES // 4 and (size := len(value.encode("utf-8"))) > MAX_CONTENT_BYTES:
            # The stored tsvector of the content must stay under PostgreSQL's 1 MB limit.
            raise ValueError(f"content is {size:,} bytes of UTF-8, over the limit of {MAX_CONTENT_BYTES:,}")
        if not value.strip():
            raise ValueError("content must not be empty or whitespace only")
        return value

    @field_validator("salience", "confidence", mode="before")
    @classmethod
    def _score_not_bool(cls, value: Any) -> Any:
        return _reject_bool(value)

    @field_validator("at")
    @classmethod
    def _at_in_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata_as_json(cls, value: Any) -> Any:
        # Dates, decimals, UUIDs… mapped as at every door (ragstore/common/jsonvalue.py); bytes, sets refused.
        from ragstore.common.jsonvalue import json_metadata

        return json_metadata(value, "metadata") if isinstance(value, Mapping) else value

    @field_validator("metadata")
    @classmethod
    def _metadata_finite(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        _check_finite(value, "metadata")
        return value


def _known_store(value: Any) -> Store:
    if isinstance(value, Store):
        return value
    if isinstance(value, str) and value in Store._value2member_map_:
        return Store(value)
    known = ", ".join(s.value for s in ALL_STORES)
    raise ValueError(f"unknown store {value!r} (known: {known})")


class AgentProfile(BaseModel):
    """An agent's memory declaration: its memory agent id and the stores it may read.

    Promises: ``agent`` matches ``[A-Za-z0-9_.-]{1,64}``; ``stores`` is a non-empty set of known stores
    (duplicates collapse). An unknown store is a validation error whose message names it; unknown keys
    are refused so a typo (``"store"``) cannot silently declare nothing.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: Annotated[str, Field(pattern=AGENT_ID_PATTERN)]
    stores: Annotated[frozenset[Store], Field(min_length=1)]

    @field_validator("stores", mode="before")
    @classmethod
    def _stores_known(cls, value: Any) -> Any:
        if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
            raise ValueError("stores must be a list of store names")
        return frozenset(_known_store(item) for item in value)


def load_profile(path: str | Path) -> AgentProfile:
    """Read an :class:`AgentProfile` from a ``.json`` or ``.toml`` file.

    The file holds ``{"agent": "ana", "stores": ["episodic", "semantic"]}`` (or the same two keys in TOML).
    Raises :class:`~ragstore.errors.NotFound` when the file does not exist, and
    :class:`~ragstore.errors.InvalidInput` — with the file name and the offending field in the message —
    for another suffix, undecodable or unparsable content, or a field that fails validation.
    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise InvalidInput(f"{file}: agent profile must be a .json or .toml file, not {suffix or 'no suffix'!r}")
    raw = read_bytes(file, "agent profile")  # a FIFO or device is refused, never opened for reading
    try:
        text = raw.decode("utf-8")
        if nesting_depth(text) > MAX_DEPTH:
            raise InvalidInput(f"{file}: agent profile nested deeper than {MAX_DEPTH} levels")
        data: Any = json.loads(text) if suffix == ".json" else tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{file}: agent profile is not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise InvalidInput(f"{file}: agent profile is not valid {suffix[1:].upper()}: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInput(f"{file}: agent profile must be an object with 'agent' and 'stores'")
    try:
        return AgentProfile.model_validate(data)
    except ValidationError as exc:
        problem = first_problem(exc, "(top level)")
        raise InvalidInput(f"{file}: field '{problem.field}': {problem.reason}") from exc


class StorePolicy(BaseModel):
    """Floors and cap for one store: keep records with salience/confidence >= the floor, at most ``cap``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cap: Annotated[int, Field(ge=0)]
    min_salience: Score | None = None
    min_confidence: Score | None = None

    def admits(self, record: MemoryRecord) -> bool:
        """True when ``record`` passes both floors (inclusive); ``None`` floors admit everything."""
        if self.min_salience is not None and record.salience < self.min_salience:
            return False
        return self.min_confidence is None or record.confidence >= self.min_confidence


class CompositionPolicy(BaseModel):
    """Per-store floors and caps, and the stores a task hint filters; defaults as in
    docs/decisions.md, "Agent memory".

    Override one store and keep the rest: ``CompositionPolicy(episodic=StorePolicy(cap=3, min_salience=0.5))``
    or ``DEFAULT_POLICY.model_copy(update={...})``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    episodic: StorePolicy = StorePolicy(cap=10, min_salience=0.2)
    semantic: StorePolicy = StorePolicy(cap=10, min_confidence=0.3)
    procedural: StorePolicy = StorePolicy(cap=5)
    decision: StorePolicy = StorePolicy(cap=5)
    transcript: StorePolicy = StorePolicy(cap=20)
    hint_stores: frozenset[Store] = frozenset({Store.SEMANTIC, Store.PROCEDURAL})

    def for_store(self, store: Store) -> StorePolicy:
        """The floors and cap of ``store``."""
        policy: StorePolicy = getattr(self, store.value)
        return policy


DEFAULT_POLICY = CompositionPolicy()
