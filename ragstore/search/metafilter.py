"""Metadata filters with operators: ``{"year": {"$gte": 2020}, "$or": [{"lang": "en"}, {"lang": "fr"}]}``.

A ``metadata=`` filter with no ``$`` operator anywhere is a containment (``metadata @> <json>``),
as it has always been. One that uses operators is compiled here into a SQL condition whose every key and
value is a parameter (the SQL text depends only on the filter's shape, never on its values):

- ``{"k": v}`` inside an operator filter: containment ``metadata @> {"k": v}``;
- ``{"k": {"$eq": v}}`` / ``{"$ne": v}``: the key is present and its JSON value equals / differs from ``v``
  (a chunk without the key never matches ``$ne``);
- ``{"k": {"$gt" | "$gte" | "$lt" | "$lte": v}}``: ``v`` a number or a string; only values of that JSON
  type compare (a number never compares with a string);
- ``{"k": {"$in" | "$nin": [v, …]}}``: the key is present and its value is / is not one of the list's
  scalars;
- ``{"$and": [f, …]}`` / ``{"$or": [f, …]}``: filters combined; several entries of one object are ANDed.

Anything else (another ``$`` word, an empty ``$and``, a list where a scalar belongs) is InvalidInput
naming the problem, before any database call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from ragstore.errors import InvalidInput

COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
LOGICAL = ("$and", "$or")
_SQL_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}

# The shape of a compiled filter: ("contains",), ("$gt",), ... for a leaf, ("$and"|"$or", (child, ...)).
Shape = tuple[Any, ...]


@dataclass(frozen=True)
class Leaf:
    op: str  # "contains" or one of COMPARISONS
    key: str
    value: Any


@dataclass(frozen=True)
class Branch:
    op: str  # "$and" or "$or"
    children: tuple[Leaf | Branch, ...]


Node = Leaf | Branch


def uses_operators(value: Any) -> bool:
    """True when a ``metadata=`` filter holds a ``$`` operator at any of the places operators go."""
    if not isinstance(value, dict):
        return False
    for key, item in value.items():
        if isinstance(key, str) and key.startswith("$"):
            return True
        if isinstance(item, dict) and any(isinstance(k, str) and k.startswith("$") for k in item):
            return True
    return False


def parse(metadata: dict[str, Any]) -> Node:
    """The condition tree of an operator filter; InvalidInput names the first part it cannot express."""
    return _object(metadata, "metadata")


def _object(value: Any, where: str) -> Node:
    if not isinstance(value, dict) or not value:
        raise InvalidInput(f"{where}: a filter must be a non-empty JSON object, got {value!r}")
    parts: list[Node] = []
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise InvalidInput(f"{where}: a metadata key must be non-empty text, got {key!r}")
        if key in LOGICAL:
            if not isinstance(item, list) or not item:
                raise InvalidInput(f"{where}.{key}: takes a non-empty list of filters, got {item!r}")
            children = tuple(_object(child, f"{where}.{key}[{i}]") for i, child in enumerate(item))
            parts.append(children[0] if len(children) == 1 else Branch(key, children))
        elif key.startswith("$"):
            raise InvalidInput(
                f"{where}: unknown filter operator {key!r}; supported: {', '.join(LOGICAL + COMPARISONS)}"
            )
        elif isinstance(item, dict) and any(isinstance(k, str) and k.startswith("$") for k in item):
            parts.extend(_field(key, item, f"{where}.{key}"))
        else:
            parts.append(Leaf("contains", key, item))
    return parts[0] if len(parts) == 1 else Branch("$and", tuple(parts))


def _field(key: str, ops: dict[str, Any], where: str) -> list[Node]:
    out: list[Node] = []
    for op, operand in ops.items():
        if op not in COMPARISONS:
            raise InvalidInput(
                f"{where}: unknown comparison {op!r} (a field's operators cannot be mixed with plain keys); "
                f"supported: {', '.join(COMPARISONS)}"
            )
        if op in ("$in", "$nin"):
            if not isinstance(operand, list) or not all(_is_scalar(v) for v in operand):
                raise InvalidInput(f"{where}.{op}: takes a list of scalars (text, numbers, booleans, null)")
        elif op in _SQL_COMPARE:
            if isinstance(operand, bool) or not isinstance(operand, int | float | str):
                raise InvalidInput(f"{where}.{op}: compares with a number or a text, got {operand!r}")
        out.append(Leaf(op, key, operand))
    return out


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def shape(node: Node) -> Shape:
    """What the SQL text depends on (values left out), hashable: a statement is rendered once per shape."""
    if isinstance(node, Leaf):
        return (node.op,)
    return (node.op, tuple(shape(child) for child in node.children))


def render(node_shape: Shape, alias: str = "e") -> sql.Composable:
    """The SQL condition of a filter of shape ``node_shape`` over the table ``alias`` (its ``metadata``
    column); its parameters
    are named ``mf<n>_k``/``mf<n>_v``/``mf<n>_t`` in the order :func:`params` fills them."""
    counter = [0]
    return _render(node_shape, sql.Identifier(alias), counter)


def _render(node_shape: Shape, alias: sql.Identifier, counter: list[int]) -> sql.Composable:
    op = node_shape[0]
    if op in LOGICAL:
        joiner = sql.SQL(" AND " if op == "$and" else " OR ")
        return sql.SQL("(") + joiner.join(_render(child, alias, counter) for child in node_shape[1]) + sql.SQL(")")
    n = counter[0]
    counter[0] += 1
    key = sql.Placeholder(f"mf{n}_k")
    value = sql.Placeholder(f"mf{n}_v")
    field = sql.SQL("({}.metadata -> {})").format(alias, key)
    if op == "contains":
        return sql.SQL("{}.metadata @> {}").format(alias, value)
    if op == "$eq":
        return sql.SQL("{} = {}").format(field, value)
    if op == "$ne":
        return sql.SQL("({f} IS NOT NULL AND {f} <> {v})").format(f=field, v=value)
    if op == "$in":
        return sql.SQL("({f} IS NOT NULL AND {v} @> jsonb_build_array({f}))").format(f=field, v=value)
    if op == "$nin":
        return sql.SQL("({f} IS NOT NULL AND NOT {v} @> jsonb_build_array({f}))").format(f=field, v=value)
    kind = sql.Placeholder(f"mf{n}_t")
    return sql.SQL("(jsonb_typeof({f}) = {t} AND {f} {cmp} {v})").format(
        f=field, t=kind, cmp=sql.SQL(_SQL_COMPARE[op]), v=value
    )


def params(node: Node) -> dict[str, Any]:
    """The parameters of :func:`render` for ``node`` (same traversal order)."""
    out: dict[str, Any] = {}
    _params(node, out, [0])
    return out


def _params(node: Node, out: dict[str, Any], counter: list[int]) -> None:
    if isinstance(node, Branch):
        for child in node.children:
            _params(child, out, counter)
        return
    n = counter[0]
    counter[0] += 1
    out[f"mf{n}_k"] = node.key
    if node.op == "contains":
        out[f"mf{n}_v"] = Jsonb({node.key: node.value})
    else:
        out[f"mf{n}_v"] = Jsonb(node.value)
    if node.op in _SQL_COMPARE:
        out[f"mf{n}_t"] = "string" if isinstance(node.value, str) else "number"
