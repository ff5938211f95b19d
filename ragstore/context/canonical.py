"""Canonical JSON, content ids and the token estimate: the three rulers every pack is measured with."""

from __future__ import annotations

import hashlib

from ragstore.common.canonical import canonical_bytes, canonical_json

__all__ = ["canonical_bytes", "canonical_json", "estimate_tokens", "sha256_hex", "tokens_for_length"]


def sha256_hex(value: object) -> str:
    """SHA-256 (lowercase hex) of the canonical bytes of ``value``; any changed byte changes it."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def tokens_for_length(length: int) -> int:
    """``max(1, ceil(length / 4))``: the ≈4-characters-per-token ruler, in integer arithmetic."""
    return max(1, -(-length // 4))


def estimate_tokens(value: object) -> int:
    """``max(1, ceil(len(canonical_json(value)) / 4))``, counting characters (code points), not bytes."""
    return tokens_for_length(len(canonical_json(value)))
