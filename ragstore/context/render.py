"""Markdown rendering: the pack as the text a model reads, layer by layer, each under its heading."""

from __future__ import annotations

import json
import re

from ragstore.context.models import ContextPack

__all__ = ["render_markdown"]

_TITLES = {
    "L0": "Brief",
    "L1": "Repository map",
    "L2": "Files",
    "L3": "Snippets",
    "L4": "Summaries",
    "L5": "State",
    "L6": "Artifacts and constraints",
    "L7": "Manifest",
}


def _fence(text: str, info: str = "") -> str:
    # A fence longer than any backtick run inside, so file content can never close it early.
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{ticks}{info}\n{body}{ticks}"


def _section(name: str) -> list[str]:
    return ["", f"## {name} · {_TITLES[name]}", ""]


def render_markdown(pack: ContextPack) -> str:
    """The pack as Markdown: a header with the ids and budget, then each present layer in order L0→L7.

    Deterministic (same pack, same text); shed layers are left out and listed in the header.
    """
    layers = pack.layers
    budget = pack.budget
    verdict = "within budget" if budget.within_budget else "OVER BUDGET"
    out = [
        "# Context pack",
        "",
        f"- pack_id: `{pack.pack_id}`",
        f"- manifest_id: `{pack.manifest_id or '-'}`",
        f"- budget: {budget.estimated_tokens} / {budget.max_tokens} tokens ({verdict})",
    ]
    if pack.shed is not None:
        shed_layers = ", ".join(pack.shed.dropped_layers) or "none"
        out.append(f"- shed ({pack.shed.strategy}): layers {shed_layers}; items {len(pack.shed.dropped_items)}")
        if pack.shed.note:
            out.append(f"- note: {pack.shed.note}")
    out += [*_section("L0"), layers.L0]
    if layers.L1 is not None:
        out += _section("L1")
        out += [f"- {path}" for path in layers.L1] or ["(none)"]
    if layers.L2 is not None:
        out += _section("L2")
        for entry in layers.L2:
            suffix = entry.path.rsplit(".", 1)[-1] if "." in entry.path.rsplit("/", 1)[-1] else ""
            out += [f"### {entry.path}", "", _fence(entry.content, suffix), ""]
        if not layers.L2:
            out.append("(none)")
    if layers.L3 is not None:
        out += _section("L3")
        for rank, snippet in enumerate(layers.L3, start=1):
            out += [f"### {rank}. {snippet.ref}", "", f"_{snippet.reason}_", "", _fence(snippet.text), ""]
        if not layers.L3:
            out.append("(none)")
    if layers.L4 is not None:
        out += _section("L4")
        out += [f"- {summary}" for summary in layers.L4] or ["(none)"]
    if layers.L5 is not None:
        out += _section("L5")
        state = json.dumps(layers.L5, indent=2, sort_keys=True, ensure_ascii=False)
        out.append(_fence(state, "json") if layers.L5 else "(none)")
    if layers.L6 is not None:
        out += _section("L6")
        out += ["Constraints:", ""] + ([f"- {c}" for c in layers.L6.constraints] or ["(none)"])
        out += ["", "Artifacts:", ""] + ([f"- {a}" for a in layers.L6.artifacts] or ["(none)"])
    if layers.L7 is not None:
        out += _section("L7")
        out += ["| path | sha256 | bytes | lines |", "|---|---|---|---|"]
        out += [f"| {e.path} | {e.sha256} | {e.bytes} | {e.lines} |" for e in layers.L7]
    return "\n".join(out).rstrip("\n") + "\n"
