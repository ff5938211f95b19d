"""Canonical JSON: the one JSON form ragstore hashes, compares and writes packs and bundles as."""

from __future__ import annotations

import json

__all__ = ["canonical_bytes", "canonical_json"]


def canonical_json(value: object) -> str:
    """The one JSON text of ``value``: sorted keys, ``,``/``:`` separators, non-ASCII kept as is.

    Equal values give equal text in any process. Raises ``ValueError`` on NaN or infinities (they have
    no JSON form) and ``TypeError`` on values JSON cannot hold.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_bytes(value: object) -> bytes:
    """:func:`canonical_json` encoded as UTF-8: the bytes content ids are computed from."""
    return canonical_json(value).encode("utf-8")
