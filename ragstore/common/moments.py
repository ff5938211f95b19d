"""The one rule for a moment in time ragstore is given: a timezone-aware datetime."""

from __future__ import annotations

from datetime import datetime

from ragstore.errors import InvalidInput

__all__ = ["check_aware"]


def check_aware(name: str, value: object) -> datetime:
    """``value`` when it is a timezone-aware datetime; otherwise InvalidInput naming ``name`` (and, for a
    naive datetime, how to give it a timezone)."""
    if not isinstance(value, datetime):
        raise InvalidInput(f"{name} must be a datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        naive = value.isoformat()
        raise InvalidInput(
            f"{name} must be timezone-aware, got the naive datetime {naive} (it needs a timezone, e.g. "
            f"{naive}Z or {naive}+00:00)"
        )
    return value
