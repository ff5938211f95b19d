"""``ragstore context-pack``: build, shed, render or verify a layered context pack (L0–L7).

The command only parses options and calls the library (:mod:`ragstore.context`); errors are
RagstoreError and propagate to the main group, which prints them on one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ragstore.cli.main import app, terminal_safe
from ragstore.cli.search import closing, hyde_options, make_hyde, make_reranker, reranker_options
from ragstore.context import (
    BudgetConfig,
    ContextPack,
    canonical_json,
    hits_to_snippets,
    load_budget_config,
    pack_bytes,
    render_markdown,
    select_token_budget,
    shed,
    shed_within_layers,
    verify,
)
from ragstore.context.sources import build_from_disk, load_pack
from ragstore.search.api import MODES
from ragstore.search.request import Hit

__all__ = ["context_pack"]


def _retrieve(
    ctx: click.Context,
    family: str,
    query: str,
    k: int,
    mode: str,
    rerank: str | None,
    mmr_lambda: float,
    remote: dict[str, Any] | None = None,
) -> list[Hit]:
    """The hits for ``query`` in ``family`` from the database (:meth:`ragstore.Store.search`).

    Raises whatever the search raises (DatabaseUnavailable, NotFound, …).
    """
    remote = remote or {}
    reranker = make_reranker(rerank, remote)
    hyde = make_hyde(remote)
    with closing(reranker, hyde), app(ctx).store() as store:
        hits = store.search(
            family,
            query,
            k=k,
            mode=mode,
            rerank=rerank,
            mmr_lambda=mmr_lambda,
            reranker=reranker,
            rerank_depth=remote.get("rerank_depth") or 50,
            hyde=hyde,
        )
    if hyde is not None and hyde.last is not None and hyde.last.note:
        click.echo(terminal_safe(f"note: {hyde.last.note}"), err=True)
    return hits


def _memory(ctx: click.Context, profile: Path, task_hint: str | None) -> tuple[list[str], dict[str, Any]]:
    """The agent's composed memory as (L4 lines, L5 state), read now from the database
    (:meth:`ragstore.store.Memory.layers`)."""
    with app(ctx).store() as store:
        return store.memory.layers(profile, task_hint=task_hint)


def _emit(text: bytes, out: Path | None) -> None:
    if out is None:
        click.echo(text)
    else:
        out.write_bytes(text)


def _verify(pack_path: Path, root: Path, fmt: str | None) -> None:
    report = verify(load_pack(pack_path), root)
    if fmt == "json":
        click.echo(canonical_json(report.as_dict()))
    else:
        for line in report.lines():
            click.echo(line)
    if not report.ok:
        raise click.exceptions.Exit(1)


def _budget(budget: int | None, model: str | None, role: str | None, budgets: Path | None) -> int:
    if budget is not None:
        if model or role or budgets:
            raise click.UsageError("--budget excludes --model, --role and --budgets")
        return budget
    config = load_budget_config(budgets) if budgets is not None else BudgetConfig()
    return select_token_budget(model, role, config)


@click.command("context-pack")
@click.option("--brief", help="L0: the task in one line.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), help="Root; fills L1 with its files.")
@click.option("--file", "files", multiple=True, type=click.Path(path_type=Path), help="L2: a whole file.")
@click.option("--summary", "summaries", multiple=True, help="L4: a compressed summary (repeatable).")
@click.option("--state", type=click.Path(path_type=Path), help="L5: debate/phase state, a JSON object file.")
@click.option("--artifact", "artifacts", multiple=True, help="L6: an artifact, by reference (repeatable).")
@click.option("--constraint", "constraints", multiple=True, help="L6: a constraint (repeatable).")
@click.option("--budget", type=click.IntRange(min=1), help="Max tokens (excludes --model/--role/--budgets).")
@click.option("--model", help="Pick the budget for this model from --budgets.")
@click.option("--role", help="Pick the budget for this role from --budgets.")
@click.option("--budgets", type=click.Path(path_type=Path), help="Budgets file (TOML, or .json).")
@click.option("--shed", "do_shed", is_flag=True, help="Drop whole layers L7, L6, … (never L0) until it fits.")
@click.option("--shed-within-layers", is_flag=True, help="Drop low-ranked snippets, large files, then layers.")
@click.option("--retrieve", "query", help="Fill L3 with the hits for this query.")
@click.option("--family", help="The family to retrieve from (with --retrieve).")
@click.option("-k", "k", type=click.IntRange(min=1), default=8, show_default=True, help="Hits to retrieve.")
@click.option("--mode", type=click.Choice(MODES), default="hybrid", show_default=True, help="Search mode.")
@click.option("--rerank", type=click.Choice(["mmr", "cross"]), help="Rerank the hits (MMR, or cross: --reranker-url).")
@click.option("--lambda", "mmr_lambda", type=float, default=0.5, show_default=True, help="MMR λ.")
@reranker_options
@hyde_options
@click.option(
    "--memory-profile",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Put this agent profile's composed memory in L4 (records) and L5 (bundle id, kept ids).",
)
@click.option("--memory-task-hint", help="Task hint for the memory composition (semantic and procedural).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "markdown"]),
    help="json (canonical, the default) or markdown; with --verify, json or one line per finding.",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
@click.option("--verify", "verify_path", type=click.Path(path_type=Path), help="Check a saved pack.json.")
@click.pass_context
def context_pack(ctx: click.Context, /, **opts: Any) -> None:
    """Build the layered context pack (L0 brief … L7 manifest) as canonical JSON or Markdown.

    The budget is reported, never enforced, unless --shed or --shed-within-layers is given.
    With --verify, recompute a saved pack's ids and manifest against the files under --repo (default: .)
    and exit 1 naming every changed or missing file.
    """
    root: Path = opts["repo"] if opts["repo"] is not None else Path(".")
    if opts["verify_path"] is not None:
        _verify(opts["verify_path"], root, opts["fmt"])
        return
    if opts["brief"] is None:
        raise click.UsageError("--brief is required (or --verify pack.json)")
    max_tokens = _budget(opts["budget"], opts["model"], opts["role"], opts["budgets"])
    snippets = None
    if opts["query"] is not None:
        if not opts["family"]:
            raise click.UsageError("--retrieve needs --family")
        hits = _retrieve(
            ctx,
            opts["family"],
            opts["query"],
            opts["k"],
            opts["mode"],
            opts["rerank"],
            opts["mmr_lambda"],
            opts,
        )
        lam = opts["mmr_lambda"] if opts["rerank"] == "mmr" else None
        snippets = hits_to_snippets(hits, opts["query"], opts["mode"], opts["rerank"], lam)
    memory_summaries: list[str] = []
    memory_state: dict[str, Any] | None = None
    if opts["memory_profile"] is not None:
        memory_summaries, memory_state = _memory(ctx, opts["memory_profile"], opts["memory_task_hint"])
    pack: ContextPack = build_from_disk(
        brief=opts["brief"],
        root=root,
        max_tokens=max_tokens,
        map_repo=opts["repo"] is not None,
        files=tuple(str(path) for path in opts["files"]),
        summaries=tuple(opts["summaries"]) + tuple(memory_summaries),
        constraints=opts["constraints"],
        artifacts=opts["artifacts"],
        state_path=opts["state"],
        snippets=snippets,
        extra_state=memory_state,
    )
    if opts["shed_within_layers"]:
        pack = shed_within_layers(pack, max_tokens)
    elif opts["do_shed"]:
        pack = shed(pack, max_tokens)
    if pack.shed is not None and not pack.shed.fits:
        click.echo(f"warning: {pack.shed.note}", err=True)
    text = render_markdown(pack).encode("utf-8") if opts["fmt"] == "markdown" else pack_bytes(pack)
    _emit(text, opts["out"])
    if opts["out"] is not None:
        verdict = "within budget" if pack.budget.within_budget else "over budget"
        budget = pack.budget
        click.echo(
            f"wrote {opts['out']}: pack {pack.pack_id[:12]}, {budget.estimated_tokens}/{budget.max_tokens} "
            f"tokens, {verdict}",
            err=True,
        )
