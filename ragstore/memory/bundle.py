"""The composed memory bundle, its canonical JSON and its markdown rendering.

A :class:`Bundle` holds, for each declared store of one agent, the records composition kept, plus what
went wrong beside it: stores whose read failed (:class:`ReadFailure`) and records a reader should not
have returned (:class:`Rejection`). Its canonical JSON — sorted keys, compact separators, UTF-8, ``at``
as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` — depends only on those values, so the same records give the same
bytes in any process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from types import MappingProxyType
from typing import Any, Literal

from ragstore.common.canonical import canonical_bytes, canonical_json
from ragstore.common.fields import fields_dict
from ragstore.memory.models import MemoryRecord, Store

__all__ = [
    "Bundle",
    "ReadFailure",
    "Rejection",
    "RejectionReason",
    "canonical_bytes",
    "canonical_json",
    "format_at",
    "record_to_dict",
]

RejectionReason = Literal["other_agent", "other_store", "not_a_record", "duplicate_id"]


def format_at(at: datetime) -> str:
    """``at`` in UTC as ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (always microseconds, always ``Z``)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class JsonForm:
    """Mixin for memory's dataclasses: :meth:`to_dict`, every field in declaration order, a datetime
    rendered by :func:`format_at` and an enum (a store) by its value."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {name: _json_value(value) for name, value in fields_dict(self).items()}


def _json_value(value: object) -> object:
    if isinstance(value, datetime):
        return format_at(value)
    return value.value if isinstance(value, Enum) else value


def record_to_dict(record: MemoryRecord) -> dict[str, Any]:
    """The JSON-ready dict of a record, ``at`` rendered by :func:`format_at`."""
    return {
        "id": record.id,
        "agent": record.agent,
        "store": record.store.value,
        "at": format_at(record.at),
        "content": record.content,
        "salience": record.salience,
        "confidence": record.confidence,
        "tags": list(record.tags),
        "metadata": record.metadata,
    }


@dataclass(frozen=True, slots=True)
class ReadFailure(JsonForm):
    """A store whose read raised: it contributed nothing. ``error`` is the exception's class name."""

    store: Store
    error: str
    message: str


@dataclass(frozen=True, slots=True)
class Rejection(JsonForm):
    """``count`` records a reader of ``store`` returned that composition refused, and why.

    ``other_agent``: another agent's record; ``other_store``: a record of another store (a declared
    reader must not become a path into an undeclared store); ``not_a_record``: not a MemoryRecord;
    ``duplicate_id``: a second record with an id already kept for this store.
    """

    store: Store
    reason: RejectionReason
    count: int


@dataclass(frozen=True, slots=True)
class Bundle:
    """The composed memory of one agent.

    ``records`` has one entry per declared store (empty when nothing qualified or the read failed), in
    canonical store order, each tuple newest first with ``id`` ascending on ties. Undeclared stores have
    no entry. ``failures`` and ``rejections`` are sorted by store order, then reason.
    """

    agent: str
    records: Mapping[Store, tuple[MemoryRecord, ...]]
    failures: tuple[ReadFailure, ...] = ()
    rejections: tuple[Rejection, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", MappingProxyType(dict(self.records)))

    @property
    def ok(self) -> bool:
        """True when every declared store was read without error."""
        return not self.failures

    def all_records(self) -> tuple[MemoryRecord, ...]:
        """Every kept record, store by store in canonical order."""
        return tuple(record for records in self.records.values() for record in records)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form; it carries no clock, so equal inputs give equal dicts."""
        return {
            "agent": self.agent,
            "stores": {store.value: [record_to_dict(r) for r in recs] for store, recs in self.records.items()},
            "failures": [failure.to_dict() for failure in self.failures],
            "rejections": [rejection.to_dict() for rejection in self.rejections],
        }

    def to_json(self) -> bytes:
        """Canonical JSON bytes of :meth:`to_dict`; byte-identical for the same records."""
        return canonical_bytes(self.to_dict())

    @property
    def bundle_id(self) -> str:
        """SHA-256 (hex) of :meth:`to_json`: any changed byte changes the id."""
        return hashlib.sha256(self.to_json()).hexdigest()

    def to_markdown(self) -> str:
        """A markdown rendering for a prompt: one section per declared store, then any read failures.

        Each record is a list item ``` `at` [id] content ``` followed by its scores and tags; continuation
        lines of multi-line content are indented so they stay inside the item. Deterministic.
        """
        lines = [f"## Memory of {self.agent}", ""]
        for store, records in self.records.items():
            lines.append(f"### {store.value} ({len(records)})")
            lines.append("")
            if not records:
                lines.append("_(nothing)_")
            for record in records:
                first, *rest = record.content.strip().splitlines() or [""]
                lines.append(f"- `{format_at(record.at)}` [{record.id}] {first}")
                lines.extend(f"  {line}" if line else "" for line in rest)
                detail = f"salience {record.salience:g}, confidence {record.confidence:g}"
                if record.tags:
                    detail += "; tags: " + ", ".join(record.tags)
                lines.append(f"  _({detail})_")
            lines.append("")
        if self.failures:
            lines.append("### unavailable")
            lines.append("")
            lines.extend(f"- {f.store.value}: {f.error}: {f.message}" for f in self.failures)
            lines.append("")
        return "\n".join(lines).rstrip("\n") + "\n"
