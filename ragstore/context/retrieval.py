"""Turning search hits into L3 snippets, each with a reason a human can read. Pure: no database here."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ragstore.context.models import Snippet
from ragstore.search.request import Hit

__all__ = ["hits_to_snippets", "retrieval_reason"]


def retrieval_reason(
    query: str, rank: int, score: float, mode: str, rerank: str | None = None, mmr_lambda: float | None = None
) -> str:
    """``retrieved for "QUERY": rank 1, score 0.83, hybrid, mmr λ=0.5`` (the rerank part only when given).

    The query is quoted as a JSON string, so quotes and newlines in it are escaped and the reason stays
    one line; the score has two decimals; λ is printed in its shortest form (``0.5``, ``0.75``).
    """
    quoted = json.dumps(query, ensure_ascii=False)
    reason = f"retrieved for {quoted}: rank {rank}, score {score:.2f}, {mode}"
    if rerank:
        reason += f", {rerank}"
        if rerank == "mmr" and mmr_lambda is not None:
            reason += f" λ={mmr_lambda:g}"
    return reason


def hits_to_snippets(
    hits: Sequence[Hit],
    query: str,
    mode: str,
    rerank: str | None = None,
    mmr_lambda: float | None = None,
) -> list[Snippet]:
    """One L3 snippet per hit, in the hits' order (rank 1 first): ref is the hit's citation, text its text."""
    return [
        Snippet(
            ref=hit.citation,
            text=hit.text,
            reason=retrieval_reason(query, rank, hit.score, mode, rerank, mmr_lambda),
        )
        for rank, hit in enumerate(hits, start=1)
    ]
