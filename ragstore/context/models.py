"""The pydantic models of a context pack: what the builder takes in, and the pack L0–L7 it gives back.

Validation happens here, once, at the edge; everything downstream trusts these types. Every string must be
encodable as UTF-8 and every number in L5 finite, so canonical JSON of a validated model cannot fail.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

__all__ = [
    "FORMAT",
    "LAYER_NAMES",
    "BudgetReport",
    "ContextPack",
    "ContextPackInput",
    "DroppedItem",
    "FileEntry",
    "L6Refs",
    "LayerName",
    "Layers",
    "ManifestEntry",
    "ShedReport",
    "Snippet",
]

FORMAT: Literal["ragstore.context-pack/1"] = "ragstore.context-pack/1"
LayerName = Literal["L0", "L1", "L2", "L3", "L4", "L5", "L6", "L7"]
LAYER_NAMES: tuple[LayerName, ...] = ("L0", "L1", "L2", "L3", "L4", "L5", "L6", "L7")


def _utf8(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("must be valid Unicode (no lone surrogates)") from exc
    return value


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _one_line(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError("must be one line (no newline)")
    return value


def _rel_path(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL")
    if value.startswith("/"):
        raise ValueError("must be relative to the root, not absolute")
    if any(part in ("", ".", "..") for part in value.split("/")):
        raise ValueError("must be a normalised relative POSIX path (no empty, '.' or '..' parts)")
    return value


Text = Annotated[str, AfterValidator(_utf8)]
NonEmptyText = Annotated[str, AfterValidator(_utf8), AfterValidator(_non_empty)]
OneLine = Annotated[str, AfterValidator(_utf8), AfterValidator(_non_empty), AfterValidator(_one_line)]
RelPath = Annotated[
    str,
    AfterValidator(_utf8),
    AfterValidator(_one_line),
    AfterValidator(_non_empty),
    AfterValidator(_rel_path),
]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


def _check_json(value: JsonValue, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: numbers must be finite (no NaN or infinity)")
    if isinstance(value, str):
        _utf8(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _utf8(key)
            _check_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]")


def _state(value: dict[str, JsonValue]) -> dict[str, JsonValue]:
    _check_json(value, "state")
    return value


State = Annotated[dict[str, JsonValue], AfterValidator(_state)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileEntry(_Model):
    """An L2 file: its path relative to the root and its whole text, verbatim."""

    path: RelPath
    content: Text


class Snippet(_Model):
    """An L3 snippet: where it comes from (``ref``, e.g. a citation), its text, and why it matters."""

    ref: OneLine
    text: Text
    reason: OneLine


class L6Refs(_Model):
    """L6: artifacts by reference (paths, URLs, ids; never their content) and constraints on the task."""

    artifacts: list[OneLine] = []
    constraints: list[NonEmptyText] = []


class ManifestEntry(_Model):
    """An L7 entry: one L2 file's path, SHA-256 of its UTF-8 bytes, size in bytes and line count."""

    path: RelPath
    sha256: Sha256
    bytes: int = Field(ge=0)
    lines: int = Field(ge=0)


def _unique_paths(files: list[FileEntry]) -> list[FileEntry]:
    seen: set[str] = set()
    for entry in files:
        if entry.path in seen:
            raise ValueError(f"duplicate path {entry.path!r}")
        seen.add(entry.path)
    return files


class ContextPackInput(_Model):
    """What the builder takes: one field (or two, for L6) per layer, and the token budget.

    L7 is not an input: the builder computes the manifest from ``files``.
    """

    brief: OneLine  # L0
    repo_map: list[RelPath] = []  # L1
    files: list[FileEntry] = []  # L2
    snippets: list[Snippet] = []  # L3
    summaries: list[NonEmptyText] = []  # L4
    state: State = {}  # L5
    artifacts: list[OneLine] = []  # L6
    constraints: list[NonEmptyText] = []  # L6
    max_tokens: int = Field(strict=True, ge=1)

    _check_files = field_validator("files")(_unique_paths)


class Layers(_Model):
    """L0–L7. A layer that is ``None`` was shed and is absent from the JSON; L0 is never shed."""

    L0: OneLine
    L1: list[RelPath] | None = None
    L2: list[FileEntry] | None = None
    L3: list[Snippet] | None = None
    L4: list[NonEmptyText] | None = None
    L5: State | None = None
    L6: L6Refs | None = None
    L7: list[ManifestEntry] | None = None

    @model_serializer(mode="wrap")
    def _drop_shed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {name: value for name, value in dumped.items() if value is not None}

    def present(self) -> tuple[LayerName, ...]:
        """The names of the layers still in the pack, L0 first."""
        return tuple(name for name in LAYER_NAMES if getattr(self, name) is not None)


class BudgetReport(_Model):
    """A comparison, not a cut: ``within_budget`` is ``estimated_tokens <= max_tokens``."""

    estimated_tokens: int = Field(ge=1)
    max_tokens: int = Field(ge=1)
    within_budget: bool


class DroppedItem(_Model):
    """One item shed from inside a layer: an L3 snippet (by ref) or an L2 file (by path)."""

    layer: Literal["L2", "L3"]
    ref: str


class ShedReport(_Model):
    """What :func:`~ragstore.context.shed.shed` removed, from which pack, and whether the result fits."""

    strategy: Literal["layers", "within-layers"]
    from_pack_id: Sha256
    from_estimated_tokens: int
    max_tokens: int
    dropped_items: list[DroppedItem] = []
    dropped_layers: list[LayerName] = []
    fits: bool
    note: str = ""


class ContextPack(_Model):
    """A built pack: its layers, content ids and budget report, plus the shed record if it was shed.

    ``pack_id`` is the SHA-256 of the canonical JSON of ``layers``; ``manifest_id`` that of L7 (``None``
    once L7 is shed).
    """

    format: Literal["ragstore.context-pack/1"] = FORMAT
    pack_id: Sha256
    manifest_id: Sha256 | None = None
    layers: Layers
    budget: BudgetReport
    shed: ShedReport | None = None

    @model_serializer(mode="wrap")
    def _drop_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {name: value for name, value in dumped.items() if value is not None}
