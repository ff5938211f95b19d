"""The pure builder: validated input in, a content-addressed pack with its budget report out.

No I/O, no clock, no randomness: the same input gives the same bytes and ids in any process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from ragstore.context.canonical import canonical_bytes, canonical_json, sha256_hex, tokens_for_length
from ragstore.context.models import (
    BudgetReport,
    ContextPack,
    ContextPackInput,
    FileEntry,
    L6Refs,
    LayerName,
    Layers,
    ManifestEntry,
    ShedReport,
)

__all__ = [
    "BuildError",
    "BuildOk",
    "BuildResult",
    "FieldError",
    "assemble_pack",
    "build_context_pack",
    "count_lines",
    "layers_json",
    "manifest_entry",
    "manifest_of",
    "pack_bytes",
]

_LAYER_OF_FIELD: dict[str, LayerName] = {
    "brief": "L0",
    "repo_map": "L1",
    "files": "L2",
    "snippets": "L3",
    "summaries": "L4",
    "state": "L5",
    "artifacts": "L6",
    "constraints": "L6",
}


@dataclass(frozen=True, slots=True)
class FieldError:
    """One validation failure: the field path (``files[2].path``), its layer if any, and the message."""

    loc: str
    layer: LayerName | None
    message: str
    type: str

    def __str__(self) -> str:
        where = f"{self.loc} ({self.layer})" if self.layer else (self.loc or "input")
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class BuildOk:
    """The builder succeeded; ``pack`` is the result."""

    pack: ContextPack
    ok: Literal[True] = True


@dataclass(frozen=True, slots=True)
class BuildError:
    """The input was invalid; ``errors`` names every bad field. Nothing was built."""

    errors: tuple[FieldError, ...]
    ok: Literal[False] = False

    def message(self) -> str:
        """All errors on one line, for a CLI or a log."""
        return "invalid context pack input: " + "; ".join(str(error) for error in self.errors)


BuildResult = BuildOk | BuildError


def count_lines(content: str) -> int:
    """Newline count, plus one for a last line without a newline (``""`` has 0 lines, ``"a"`` has 1)."""
    return content.count("\n") + (1 if content and not content.endswith("\n") else 0)


def manifest_entry(path: str, data: bytes) -> ManifestEntry:
    """The L7 entry of a file with these bytes: SHA-256, size and line count of the bytes themselves."""
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return ManifestEntry(path=path, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data), lines=lines)


def manifest_of(files: list[FileEntry]) -> list[ManifestEntry]:
    """The manifest of these L2 files (their UTF-8 bytes), sorted by path."""
    return [manifest_entry(f.path, f.content.encode("utf-8")) for f in sorted(files, key=lambda f: f.path)]


def layers_json(layers: Layers) -> str:
    """Canonical JSON of the layers still present: what ``pack_id`` and the token estimate measure."""
    return canonical_json(layers.model_dump(mode="json"))


def assemble_pack(layers: Layers, max_tokens: int, shed: ShedReport | None = None) -> ContextPack:
    """Compute ``pack_id``, ``manifest_id`` and the budget report for these layers; drops nothing."""
    text = layers_json(layers)
    estimated = tokens_for_length(len(text))
    manifest_id = None
    if layers.L7 is not None:
        manifest_id = sha256_hex([entry.model_dump(mode="json") for entry in layers.L7])
    return ContextPack(
        pack_id=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        manifest_id=manifest_id,
        layers=layers,
        budget=BudgetReport(estimated_tokens=estimated, max_tokens=max_tokens, within_budget=estimated <= max_tokens),
        shed=shed,
    )


def _field_errors(exc: ValidationError) -> tuple[FieldError, ...]:
    errors = []
    for error in exc.errors(include_url=False):
        loc = ""
        for part in error["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        head = error["loc"][0] if error["loc"] else ""
        layer = _LAYER_OF_FIELD.get(head) if isinstance(head, str) else None
        errors.append(FieldError(loc=loc, layer=layer, message=error["msg"], type=error["type"]))
    return tuple(errors)


def build_context_pack(data: ContextPackInput | Mapping[str, Any]) -> BuildResult:
    """Validate ``data`` and build the pack, or return every validation error with its field path.

    Never raises on bad input. L1 is sorted and de-duplicated, L2 sorted by path, L3 kept in the given
    (rank) order, L7 computed from L2. The budget is compared, never enforced: nothing is dropped here.
    """
    try:
        if isinstance(data, ContextPackInput):
            spec = data
        elif isinstance(data, Mapping):
            spec = ContextPackInput.model_validate(dict(data))
        else:
            return BuildError(errors=(FieldError("", None, "input must be a mapping", "model_type"),))
    except ValidationError as exc:
        return BuildError(errors=_field_errors(exc))
    files = sorted(spec.files, key=lambda f: f.path)
    layers = Layers(
        L0=spec.brief,
        L1=sorted(set(spec.repo_map)),
        L2=files,
        L3=list(spec.snippets),
        L4=list(spec.summaries),
        L5=dict(spec.state),
        L6=L6Refs(artifacts=list(spec.artifacts), constraints=list(spec.constraints)),
        L7=manifest_of(files),
    )
    return BuildOk(pack=assemble_pack(layers, spec.max_tokens))


def pack_bytes(pack: ContextPack) -> bytes:
    """The canonical bytes of the whole pack, as written to ``pack.json``."""
    return canonical_bytes(pack.model_dump(mode="json"))
