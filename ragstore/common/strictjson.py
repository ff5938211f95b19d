"""JSON from outside, read strictly: what PostgreSQL's ``jsonb`` and canonical JSON can hold, nothing else.

:func:`loads_strict` refuses, with one line naming the input, what ``json.loads`` lets through or fails on
badly: ``NaN``/``Infinity`` (and numbers too large for a float), NUL characters (``\\u0000``, which ``jsonb``
cannot store), lone surrogates (``\\ud800``, not Unicode text), invalid UTF-8, and nesting deeper than a
limit (checked on the text before parsing, so a document nested 100,000 deep cannot exhaust the stack).
:func:`check_json_value` applies the same rules to a value already in Python (a library caller's dict).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ragstore.common.text import text_problem
from ragstore.errors import InvalidInput

MAX_DEPTH = 64
# The largest integer a float holds is below 2**1024 (about 1.8e308).
_FLOAT_MAX_BITS = 1024


def nesting_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text`` outside strings (0 for a scalar), in one linear scan
    that allocates nothing, whatever the depth."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (only finite numbers are)")


def check_json_value(value: Any, what: str, *, max_depth: int = MAX_DEPTH) -> None:
    """InvalidInput (``"<what>: …"``) unless ``value`` is JSON data within the rules above: dicts with text
    keys, lists, text, finite numbers, booleans and None, nested at most ``max_depth`` deep."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        where = f"{what}{path}"
        if isinstance(item, dict | list):
            if depth + 1 > max_depth:
                raise InvalidInput(f"{what}: nested deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise InvalidInput(f"{where}: key {key!r} is not text")
                    problem = text_problem(key)
                    if problem is not None:
                        raise InvalidInput(f"{where}: a key holds {problem}")
                    stack.append((child, depth + 1, f"{path}.{key}"))
            else:
                stack.extend((child, depth + 1, f"{path}[{i}]") for i, child in enumerate(item))
        elif isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                raise InvalidInput(f"{where}: holds {problem}")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidInput(f"{where}: {item!r} is not a finite number (JSON has no NaN or Infinity)")
        elif isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > _FLOAT_MAX_BITS:
            # As a number beyond a float is (it reads as infinity): refused, with or without a decimal point.
            raise InvalidInput(f"{where}: an integer of {len(str(abs(item)))} digits is beyond what a float holds")
        elif item is None or isinstance(item, bool | int):
            continue
        else:
            raise InvalidInput(f"{where}: {type(item).__name__} is not a JSON value")


def loads_strict(data: str | bytes, what: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` as strict JSON (see the module docstring); InvalidInput ``"<what>: …"`` otherwise."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{what}: invalid UTF-8 at byte {exc.start}") from exc
    else:
        text = data
    depth = nesting_depth(text)
    if depth > max_depth:
        raise InvalidInput(f"{what}: JSON nested {depth} levels deep; at most {max_depth} are accepted")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{what}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    except (ValueError, RecursionError) as exc:
        reason = str(exc).split(";")[0]
        raise InvalidInput(f"{what}: not accepted: {reason}") from exc
    check_json_value(value, what, max_depth=max_depth)
    return value
