"""``POST /v1/context-pack``: the layered context pack of :mod:`ragstore.context`, built from a request.

The same pack ``ragstore context-pack`` builds for the same inputs, less what lives on the server's disk:
a request names no file, repository or state file (L1, L2 and L7 stay empty; L5 is the request's
``state``), so a token reads nothing of the server's filesystem.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ragstore.context import hits_to_snippets, pack_bytes, render_markdown, shed, shed_within_layers
from ragstore.context.sources import build_from_disk
from ragstore.search.request import Hit

if TYPE_CHECKING:
    from ragstore.memory import AgentProfile
    from ragstore.serve.app import PackBody
    from ragstore.store import Store


def build_pack(
    store: Store,
    body: PackBody,
    hits: Sequence[Hit] | None,
    profile: AgentProfile | None,
    task_hint: str | None,
) -> dict[str, Any]:
    """``{"pack": <the pack's canonical JSON>, "markdown": <its rendering, or None>}`` (blocking: run it in
    a thread); ``hits`` are the retrieval's, ``profile`` the agent whose memory fills L4 and L5."""
    from ragstore.memory.store import memory_layers

    snippets = None
    if hits is not None and body.retrieve is not None:
        r = body.retrieve
        snippets = hits_to_snippets(hits, r.query, r.mode, r.rerank, r.mmr_lambda if r.rerank == "mmr" else None)
    summaries, state = list(body.summaries), dict(body.state)
    if profile is not None:
        with store.connection(autocommit=False) as conn:
            memory_summaries, memory_state = memory_layers(conn, profile, task_hint, datetime.now(UTC))
        summaries += memory_summaries
        state |= memory_state
    pack = build_from_disk(
        brief=body.brief,
        root=".",
        max_tokens=body.max_tokens,
        summaries=tuple(summaries),
        constraints=tuple(body.constraints),
        artifacts=tuple(body.artifacts),
        snippets=snippets,
        extra_state=state,
    )
    if body.shed == "within-layers":
        pack = shed_within_layers(pack, body.max_tokens)
    elif body.shed == "layers":
        pack = shed(pack, body.max_tokens)
    markdown = render_markdown(pack) if body.format == "markdown" else None
    return {"pack": json.loads(pack_bytes(pack)), "markdown": markdown}
