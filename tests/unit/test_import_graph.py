"""The import graph of ragstore/ (read from the source, every import at run time: top-level and inside
functions, not those under ``if TYPE_CHECKING:``) has no circle, and no import runs from a lower layer of
:data:`LAYERS` to a higher one."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "ragstore"
# The layers, lowest first: a module may import its own layer and those below, never one above. A module
# belongs to the layer of the longest prefix of its name listed here. Three modules sit above their
# package's layer: they are operations built on a higher layer (families.chunks deletes and lists through
# ingest's writer and search's filters, families.migrate re-embeds through ingest's writer,
# embed.similarity ranks with search's cosine); serve.tokens is the token registry (db only) that Store and
# the MCP server read.
LAYERS: list[tuple[str, ...]] = [
    ("ragstore.common", "ragstore.errors", "ragstore.config"),
    ("ragstore.db", "ragstore.caches", "ragstore.embedded", "ragstore.migrate"),
    ("ragstore.families", "ragstore.embed"),
    ("ragstore.ingest", "ragstore.search"),
    ("ragstore.memory", "ragstore.context", "ragstore.sync", "ragstore.evaluation", "ragstore.families.chunks",
     "ragstore.families.migrate", "ragstore.embed.similarity", "ragstore.serve.tokens"),
    ("ragstore.store", "ragstore.store_async"),
    ("ragstore", "ragstore.cli", "ragstore.serve", "ragstore.mcpserver", "ragstore.integrations"),
]  # fmt: skip


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            if not _type_checking(child):
                todo.append(child)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in mods]
                targets = subs or [base]
            for target in targets:
                found = owner(target) if target.startswith("ragstore") else None
                if found is not None and found != name:
                    edges[name].add(found)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the longest prefix of ``module`` listed there."""
    best = (-1, -1)
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), number)
    assert best[1] >= 0, f"{module} is in no layer: add it to LAYERS"
    return best[1]


def back_arrows(edges: dict[str, set[str]]) -> list[str]:
    """Every import from a module to one of a higher layer, as ``importer -> imported``."""
    return sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets if layer_of(b) > layer_of(a))


def test_no_import_circle_in_ragstore() -> None:
    assert circles(graph()) == []


def test_no_import_runs_up_a_layer() -> None:
    assert back_arrows(graph()) == []


def test_the_check_finds_a_back_arrow() -> None:
    edges = {"ragstore.db.x": {"ragstore.search.y", "ragstore.errors"}, "ragstore.search.y": {"ragstore.db.x"}}
    assert back_arrows(edges) == ["ragstore.db.x -> ragstore.search.y"]
    assert layer_of("ragstore.families.chunks") > layer_of("ragstore.search.api") > layer_of("ragstore.families")


def test_the_check_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_reads_function_level_imports_and_skips_type_checking() -> None:
    edges = graph()
    assert "ragstore.ingest.writer" in edges["ragstore.families.chunks"]  # imported inside a function
    assert "ragstore.search.vector" not in edges["ragstore.caches"]  # only under TYPE_CHECKING
