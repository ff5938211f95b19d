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

On a family with declared filter keys (:mod:`ragstore.families.filter_keys`), :func:`declare` marks the
leaves on those keys: they are rendered with the key as a literal, ``(metadata -> 'key')``, the expression
the key's btree indexes (a containment of a scalar at the key becomes ``$eq``, ``$in`` becomes ``= ANY``),
so their shape holds the key. The rows kept are the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.abc import AdaptContext
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
    declared: bool = False  # the key is a declared filter key: rendered as (metadata -> 'key')


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


def containment(metadata: dict[str, Any]) -> Node:
    """A plain containment filter (no ``$`` operator) as a condition tree: one ``contains`` leaf per key
    (``metadata @> {"a": 1, "b": 2}`` holds exactly when ``metadata @> {"a": 1}`` and ``metadata @> {"b": 2}``)."""
    leaves = tuple(Leaf("contains", key, value) for key, value in metadata.items())
    return leaves[0] if len(leaves) == 1 else Branch("$and", leaves)


# The comparisons a btree on (metadata -> 'key') serves; $ne and $nin keep the key a parameter.
INDEXED = ("contains", "$eq", "$in", "$gt", "$gte", "$lt", "$lte")


def declare(node: Node, keys: frozenset[str] | set[str]) -> Node:
    """``node`` with its leaves on ``keys`` (the family's declared filter keys) marked declared.

    A containment of a scalar at a declared key becomes ``$eq``: ``{"k": ["x"]} @> {"k": "x"}`` is false in
    PostgreSQL, so ``metadata @> {"k": v}`` and ``(metadata -> 'k') = v`` keep the same rows when ``v`` is a
    scalar (numbers compare by value, ``1`` and ``1.0`` alike, in both). Containment of an object or a list
    stays a containment (it is not an equality)."""
    if isinstance(node, Branch):
        return Branch(node.op, tuple(declare(child, keys) for child in node.children))
    if node.key not in keys or node.op not in INDEXED:
        return node
    if node.op == "contains":
        return Leaf("$eq", node.key, node.value, True) if _is_scalar(node.value) else node
    return Leaf(node.op, node.key, node.value, True)


def shape(node: Node) -> Shape:
    """What the SQL text depends on (values left out), hashable: a statement is rendered once per shape. A
    declared leaf's shape holds its key, which its SQL text holds as a literal."""
    if isinstance(node, Leaf):
        return (node.op, node.key) if node.declared else (node.op,)
    return (node.op, tuple(shape(child) for child in node.children))


class KeyLiteral(sql.Literal):
    """A declared key as a quoted literal in a statement sent with parameters: psycopg reads every ``%`` of
    such a text as the start of a placeholder, so each is doubled (``a%s`` is written ``'a%%s'``, which
    psycopg turns back into ``'a%s'``). The index the key's btree is built by is a statement with no
    parameters, and holds the plain literal."""

    def as_bytes(self, context: AdaptContext | None = None) -> bytes:
        return super().as_bytes(context).replace(b"%", b"%%")


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
    declared = len(node_shape) == 2
    # A declared key is a literal: the expression must be the one its btree indexes, (metadata -> 'key').
    key = KeyLiteral(node_shape[1]) if declared else sql.Placeholder(f"mf{n}_k")
    value = sql.Placeholder(f"mf{n}_v")
    field = sql.SQL("({}.metadata -> {})").format(alias, key)
    if declared and op == "$in":  # the btree serves = ANY; the list holds scalars only
        return sql.SQL("{f} = ANY ({v}::jsonb[])").format(f=field, v=value)
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
    if not node.declared:
        out[f"mf{n}_k"] = node.key
    if node.op == "contains":
        out[f"mf{n}_v"] = Jsonb({node.key: node.value})
    elif node.declared and node.op == "$in":
        out[f"mf{n}_v"] = [Jsonb(v) for v in node.value]
    else:
        out[f"mf{n}_v"] = Jsonb(node.value)
    if node.op in _SQL_COMPARE:
        out[f"mf{n}_t"] = "string" if isinstance(node.value, str) else "number"
