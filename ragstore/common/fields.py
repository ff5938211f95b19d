"""The JSON-ready form of a dataclass, from its fields: one place for the ``to_dict`` every report repeats."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["fields_dict"]


def fields_dict(obj: object, *names: str, **overrides: Any) -> dict[str, Any]:
    """``{field name: value}`` of the dataclass ``obj``, in declaration order: only the fields ``names``
    (all of them when none is named), each value in ``overrides`` replacing its field's (its JSON form, say).

    Shallow: a nested dataclass, tuple or datetime stays as it is unless ``overrides`` converts it.
    Raises TypeError when ``obj`` is not a dataclass instance, ValueError for a name in ``names`` or
    ``overrides`` that is not a field.
    """
    if isinstance(obj, type) or not dataclasses.is_dataclass(obj):
        raise TypeError(f"{type(obj).__name__} is not a dataclass instance")
    known = [field.name for field in dataclasses.fields(obj)]
    unknown = sorted((set(names) | set(overrides)) - set(known))
    if unknown:
        raise ValueError(f"{type(obj).__name__} has no field {', '.join(unknown)}")
    chosen = set(names) or set(known)
    return {name: overrides[name] if name in overrides else getattr(obj, name) for name in known if name in chosen}
