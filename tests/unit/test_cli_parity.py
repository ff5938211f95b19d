"""Every command of the command line has its Store and AsyncStore method (the CLI parses, calls one Store
method, prints).

The click command tree is walked whole (the lazy top-level group included); each command is either
mapped to the Store methods that do its work, or exempt with a reason. A new command with neither fails
here, as does a mapped method missing on Store, on AsyncStore, or there not as a coroutine, and a command
module that opens a connection itself (a call of ``connect``) instead of calling its Store method.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import click

import ragstore.cli
from ragstore.cli.main import cli
from ragstore.store import Memory, Store
from ragstore.store_async import AsyncMemory, AsyncStore

# A command (its words, as typed) -> the methods it calls; ``memory.X`` is ``store.memory.X``.
METHODS: dict[str, tuple[str, ...]] = {
    "check-recall": ("check_recall", "sweep_recall"),
    "context-pack": ("context_pack", "search", "memory.layers", "verify_pack"),
    "delete": ("delete",),
    "embed rank": ("rank",),
    "embed similarity": ("similarity",),
    "embed status": ("embedder",),
    "embed text": ("embed",),
    "eval": ("eval",),
    "export": ("export",),
    "family create": ("create_family",),
    "family drop": ("drop_family",),
    "family filter-keys add": ("add_filter_key",),
    "family filter-keys list": ("filter_keys",),
    "family filter-keys remove": ("remove_filter_key",),
    "family list": ("families",),
    "family migrate": ("migrate_family", "plan_family_migration", "abort_family_migration", "migrate_storage"),
    "family show": ("family_stats", "sources"),
    "family tune": ("tune_family", "reset_fusion"),
    "get": ("get",),
    "index": ("index_files",),
    "list": ("list_chunks",),
    "memory add": ("memory.add",),
    "memory compose": ("memory.compose",),
    "memory forget": ("memory.forget",),
    "memory grant": ("memory.grant",),
    "memory import": ("memory.import_file",),
    "memory principals": ("memory.principals",),
    "memory recall": ("memory.recall",),
    "memory revoke": ("memory.revoke",),
    "migrate": ("migrate", "migration_status"),
    "search": ("search", "explain"),
    "sync add": ("sync_add",),
    "sync alter": ("sync_alter",),
    "sync list": ("sync_list",),
    "sync remove": ("sync_remove",),
    "sync run": ("sync_run",),
    "sync show": ("sync_show",),
    "sync status": ("sync_status",),
    "token create": ("create_token",),
    "token list": ("tokens",),
    "token revoke": ("revoke_token",),
    "vacuum": ("vacuum",),
}

# A command (or a group: every command under it) -> why it has no Store method.
EXEMPT: dict[str, str] = {
    "serve": "runs the HTTP server, a long-lived process over its own pool (ragstore/serve/), not one call",
    "mcp": "runs the MCP server on stdio, a long-lived process (ragstore/mcpserver/), not one call",
    "cluster": "builds a local Citus cluster of processes for tests and demos (ragstore/db/cluster.py)",
    "server": "starts and stops the embedded server's process; Store.embedded() is the library's door to it",
}


def leaf_commands() -> list[str]:
    """Every runnable command of the tree, as its words (``family filter-keys add``)."""
    ctx = click.Context(cli)
    found: list[str] = []

    def walk(command: click.Command, words: list[str]) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, (words, name)
                walk(sub, [*words, name])
        else:
            found.append(" ".join(words))

    walk(cli, [])
    return found


def exempt_reason(command: str) -> str | None:
    words = command.split()
    for n in range(len(words), 0, -1):
        reason = EXEMPT.get(" ".join(words[:n]))
        if reason is not None:
            return reason
    return None


def test_the_tree_walk_sees_the_lazy_groups_whole():
    commands = leaf_commands()
    # the lazily imported top-level commands, a nested group, and the subcommand added at load time
    assert {"search", "family filter-keys add", "family migrate", "memory grant", "token revoke"} <= set(commands)
    assert len(commands) == len(set(commands))


def test_every_command_has_its_methods_or_a_reason():
    unmapped = [c for c in leaf_commands() if c not in METHODS and exempt_reason(c) is None]
    assert not unmapped, f"commands with no Store/AsyncStore method in METHODS (or reason in EXEMPT): {unmapped}"


def test_no_command_is_both_mapped_and_exempt_and_no_mapping_is_stale():
    commands = set(leaf_commands())
    assert not [c for c in METHODS if exempt_reason(c) is not None]
    assert set(METHODS) <= commands, sorted(set(METHODS) - commands)
    assert all(any(c == e or c.startswith(e + " ") for c in commands) for e in EXEMPT), EXEMPT


def _owner(name: str, sync: bool) -> tuple[type, str]:
    if name.startswith("memory."):
        return (Memory if sync else AsyncMemory), name.removeprefix("memory.")
    return (Store if sync else AsyncStore), name


def test_each_mapped_method_exists_on_store_and_as_a_coroutine_on_async_store():
    missing: list[str] = []
    for command, names in METHODS.items():
        for name in names:
            sync_cls, attr = _owner(name, sync=True)
            async_cls, _ = _owner(name, sync=False)
            sync_fn = getattr(sync_cls, attr, None)
            async_fn = getattr(async_cls, attr, None)
            if not callable(sync_fn) or inspect.iscoroutinefunction(sync_fn):
                missing.append(f"{command}: {sync_cls.__name__}.{attr}")
            if not inspect.iscoroutinefunction(async_fn):
                missing.append(f"{command}: {async_cls.__name__}.{attr} (a coroutine)")
            elif not (async_fn.__doc__ or "").strip() or not (sync_fn.__doc__ or "").strip():
                missing.append(f"{command}: {attr} has no docstring")
    assert not missing, missing


def test_the_async_methods_of_the_parity_block_take_the_store_methods_parameters():
    for names in METHODS.values():
        for name in names:
            sync_cls, attr = _owner(name, sync=True)
            async_cls, _ = _owner(name, sync=False)
            async_fn = getattr(async_cls, attr)
            if "worker thread" not in (async_fn.__doc__ or "") or not hasattr(async_fn, "__signature__"):
                continue  # written by hand (the older methods): their own signatures
            assert inspect.signature(async_fn) == inspect.signature(getattr(sync_cls, attr)), name


# A command module -> why it may still call ``connect`` itself (open a connection beside the Store). None
# may today: every command reaches the database through AppContext.store() (Store.direct), and a long-lived
# process (serve, mcp, sync run --follow) hands the DSN to the library that opens its own connections.
OPENS_ITS_OWN: dict[str, str] = {}


def connect_calls(source: str) -> list[int]:
    """The lines of ``source`` that call a function or method named ``connect``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name == "connect":
                lines.append(node.lineno)
    return sorted(lines)


def test_the_connect_finder_sees_each_way_of_calling_it():
    source = "with app(ctx).connect() as c:\n    pass\nconn = connect(dsn)\nstore.search(x)\nconnect_given()\n"
    assert connect_calls(source) == [1, 3]


def test_no_command_module_opens_a_connection_itself():
    folder = Path(ragstore.cli.__file__).parent
    found = {
        path.name: lines
        for path in sorted(folder.glob("*.py"))
        if (lines := connect_calls(path.read_text(encoding="utf-8")))
    }
    stray = {name: lines for name, lines in found.items() if name not in OPENS_ITS_OWN}
    assert not stray, f"command modules calling connect() instead of their Store method: {stray}"
    stale = set(OPENS_ITS_OWN) - set(found)
    assert not stale, f"exceptions with no connect() call left: {stale}"
