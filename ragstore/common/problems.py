"""The first problem of a pydantic ValidationError, as the one line a user reads (``field: message``).

Every reader of user input (JSONL chunk records, eval sets, memory records and agent profiles, saved
context packs) reports the first field that failed, by its dotted path; this is where that path and the
message come from.
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


def describe_validation_error(exc: ValidationError) -> str:
    """One line: the first error's field path and message (``vector.3: Input should be a valid number``),
    and how many more there are."""
    problem = first_problem(exc)
    extra = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{problem.field}: {problem.message}{extra}"
