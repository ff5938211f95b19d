"""LIKE patterns that match user text literally."""

from __future__ import annotations

__all__ = ["like_contains", "like_escape", "like_prefix"]


def like_escape(text: str) -> str:
    """``text`` with ``\\``, ``%`` and ``_`` escaped for LIKE (PostgreSQL's default escape, ``\\``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching strings that start with ``prefix`` literally."""
    return like_escape(prefix) + "%"


def like_contains(part: str) -> str:
    """A LIKE pattern matching strings that contain ``part`` literally."""
    return f"%{like_escape(part)}%"
