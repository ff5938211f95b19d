"""Metadata values JSON does not have, mapped once for every door (``Store.index`` records, the LangChain and
LlamaIndex adapters, Parquet columns, memory records).

=====================================  ==============================================================
Python value                           stored as
=====================================  ==============================================================
``str``, ``int``, ``bool``, ``None``   itself (an integer at most what a float holds, about 1.8e308)
``float``                              itself when finite; NaN and infinities are refused
``datetime``                           ISO 8601 text: with its offset when aware
                                       (``2024-05-01T12:00:00+02:00``), as given when naive
``date`` / ``time``                    ``YYYY-MM-DD`` / ``HH:MM:SS[.ffffff][+HH:MM]``
``Decimal``                            a JSON number of the same value: an integer when whole, else the
                                       float that reads back as the same decimal; refused when no float
                                       does (too many digits), and for NaN or infinity
``UUID``                               its text (``12345678-1234-…``)
``tuple``, ``list``                    a list
``dict`` (text keys)                   an object
NumPy scalars and arrays               their Python numbers and lists
``bytes``, ``set``, anything else      refused, in one line naming the field
=====================================  ==============================================================

:func:`json_metadata` returns the mapped copy or raises InvalidInput such as
``record 3: metadata.created: bytes are not JSON; decode or base64 them first``.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from ragstore.errors import InvalidInput

MAX_DEPTH = 64
# The largest integer a float holds (about 1.8e308): past it JSON readers (and --where) see infinity.
_FLOAT_MAX_BITS = 1024


def json_metadata(value: Any, where: str) -> dict[str, Any]:
    """``value`` (a record's metadata; None is an empty object) with every value mapped as the module
    docstring says; InvalidInput ``"<where>.<field>: …"`` for a value that has no JSON form."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{where}: must be a JSON object (a dict), got {type(value).__name__}")
    mapped = json_value(value, where)
    assert isinstance(mapped, dict)
    return mapped


def json_value(value: Any, where: str, depth: int = 0) -> Any:
    """One value mapped (see the module docstring); ``where`` names it in an error."""
    kind = type(value)
    if value is None or kind is str or kind is bool:
        return value
    if kind is int:
        return _integer(value, where)
    if kind is float:
        if not math.isfinite(value):
            raise InvalidInput(f"{where}: {value!r} is not a finite number (JSON has no NaN or Infinity)")
        return value
    if depth >= MAX_DEPTH:
        raise InvalidInput(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, child in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{where}: key {key!r} is not text (JSON object keys are text)")
            out[key] = json_value(child, f"{where}.{key}", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [json_value(child, f"{where}[{i}]", depth + 1) for i, child in enumerate(value)]
    return _scalar(value, where, depth)


def _scalar(value: Any, where: str, depth: int) -> Any:
    if isinstance(value, bool):  # a bool subclass (numpy's is not one)
        return bool(value)
    if isinstance(value, int):
        return _integer(int(value), where)
    if isinstance(value, float):
        return json_value(float(value), where)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return _decimal(value, where)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raise InvalidInput(f"{where}: bytes are not JSON; decode or base64 them first")
    if isinstance(value, set | frozenset):
        raise InvalidInput(f"{where}: a set is not JSON; pass a list (sorted, to keep it stable)")
    tolist = getattr(value, "tolist", None)  # NumPy scalars and arrays
    if callable(tolist) and type(value).__module__ == "numpy":
        return json_value(tolist(), where, depth + 1)
    raise InvalidInput(
        f"{where}: {type(value).__name__} is not JSON; convert it to text, a number, a list or an object first"
    )


def _integer(value: int, where: str) -> int:
    if value.bit_length() > _FLOAT_MAX_BITS:
        raise InvalidInput(f"{where}: an integer of {len(str(abs(value)))} digits is beyond what a float holds")
    return value


def _decimal(value: Decimal, where: str) -> int | float:
    if not value.is_finite():
        raise InvalidInput(f"{where}: Decimal {value} is not a finite number (JSON has no NaN or Infinity)")
    if value.adjusted() > 308:
        raise InvalidInput(f"{where}: Decimal {value} is beyond what a float holds")
    if value == value.to_integral_value():
        return _integer(int(value), where)
    number = float(value)
    if Decimal(repr(number)) != value:
        raise InvalidInput(
            f"{where}: Decimal {value} has more digits than a JSON number keeps here (a float reads it back "
            "as another value); store it as text"
        )
    return number
