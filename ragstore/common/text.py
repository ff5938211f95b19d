"""What text ragstore takes, checked once for every input: text PostgreSQL can hold, and the texts an
embedding backend embeds.

:func:`text_problem` is the one rule of what a ``text`` or ``jsonb`` string may hold (no NUL character, no
lone surrogate); :mod:`ragstore.common.strictjson` applies it to every string of a JSON value, the search
request to its query and package prefix, the filter keys to their names. :func:`check_texts` is the input
contract of every backend's ``embed`` (:class:`ragstore.embed.base.Backend`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ragstore.errors import InvalidInput


def text_problem(value: str) -> str | None:
    """What in ``value`` PostgreSQL text cannot hold (a NUL character, a lone surrogate), or None."""
    if "\x00" in value:
        return "a NUL character (\\u0000), which PostgreSQL cannot store"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "a lone surrogate (not valid Unicode text)"
    return None


def check_texts(texts: Sequence[str]) -> None:
    """The input contract of ``embed``: a sequence (not one string) of non-empty strings.

    Raises InvalidInput naming the first offending text's position.
    """
    if isinstance(texts, str):
        raise InvalidInput("embed takes a sequence of texts, not one string")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidInput(f"text #{i} is {type(text).__name__}, not str")
        if not text:
            raise InvalidInput(f"text #{i} is empty: empty text is never embedded")
