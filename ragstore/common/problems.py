"""The first problem of a pydantic ValidationError, as the one line a user reads (``field: message``).

Every reader of user input (JSONL chunk records, eval sets, memory records and agent profiles, saved
context packs) reports the fields that failed, by their dotted paths; this is where those paths and the
messages come from.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import ValidationError


class FieldProblem(NamedTuple):
    """The first error of a ValidationError: its dotted field path (``top`` when the whole input failed),
    pydantic's message and error type, and the input it rejected."""

    field: str
    message: str
    type: str
    input: Any

    @property
    def reason(self) -> str:
        """The message without pydantic's ``Value error,`` prefix (a validator's own words)."""
        return self.message.removeprefix("Value error, ")


def first_problem(exc: ValidationError, top: str = "record") -> FieldProblem:
    """The first error of ``exc``; ``top`` names the field when the error is about the whole input."""
    first = exc.errors(include_url=False)[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or top
    return FieldProblem(field, str(first.get("msg", "invalid")), str(first.get("type", "")), first.get("input"))


# Fields named per message at most; the rest are counted (a vector of 1,000 bad numbers is one short line).
MAX_FIELDS_PER_MESSAGE = 5


def describe_validation_error(exc: ValidationError, top: str = "record") -> str:
    """One line naming every problem, in pydantic's order, fields that failed the same way sharing their
    message: ``chunk_id, package_path, text: Field required; id, content: Extra inputs are not permitted``
    (at most :data:`MAX_FIELDS_PER_MESSAGE` fields per message, then how many more)."""
    groups: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error.get("loc", ())) or top
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        groups.setdefault(message, []).append(field)
    parts = []
    for message, fields in groups.items():
        named = ", ".join(fields[:MAX_FIELDS_PER_MESSAGE])
        more = len(fields) - MAX_FIELDS_PER_MESSAGE
        parts.append(f"{named}{f' (and {more} more)' if more > 0 else ''}: {message}")
    return "; ".join(parts)
