"""The MCP tools as plain functions on a :class:`~ragstore.Store`: each returns one JSON text, bounded.

Every result fits in ``max_chars`` characters: hits are kept best first while they fit, the first one that
does not is cut (its ``text`` ends ``…``) and the rest are left out, and ``truncated`` says how many were
cut or left out, so a model knows to ask for fewer or call ``get_chunks``. Every hit carries its citation
(``[package_path#chunk_id]``) and, when the chunk's metadata has them, its ``heading`` and ``page``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ragstore.errors import InvalidInput
from ragstore.store import Store

DEFAULT_MAX_CHARS = 20_000
MAX_MAX_CHARS = 1_000_000
MAX_IDS = 100
MAX_K = 100  # an agent's answer, not a bulk export (the library allows more)
CITED_METADATA = ("heading", "page", "title", "section")
# What a cut item keeps at least of its text; below that it is left out whole.
MIN_TEXT = 80


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=True, default=str)


def check_max_chars(max_chars: int) -> int:
    if not 200 <= max_chars <= MAX_MAX_CHARS:
        raise InvalidInput(f"max_chars must be from 200 to {MAX_MAX_CHARS}, not {max_chars}")
    return max_chars


def _render(head: dict[str, Any], key: str, items: list[dict[str, Any]], left: int, total: int, limit: int) -> str:
    body: dict[str, Any] = {**head, key: items}
    if left:
        body["truncated"] = (
            f"{left} of {total} {key} cut or left out to stay within max_chars={limit}; "
            "ask for fewer, or fetch chunks by id with get_chunks"
        )
    return dumps(body)


def bounded(head: dict[str, Any], key: str, items: Sequence[dict[str, Any]], max_chars: int) -> str:
    """``head`` with ``items`` under ``key``, as one JSON text of at most ``max_chars`` characters."""
    check_max_chars(max_chars)
    total = len(items)
    kept: list[dict[str, Any]] = []
    for n, item in enumerate(items):
        whole = _render(head, key, [*kept, item], total - n - 1, total, max_chars)
        if len(whole) <= max_chars:
            kept.append(item)
            continue
        text = str(item.get("text", ""))
        room = max_chars - len(_render(head, key, [*kept, {**item, "text": ""}], total - n, total, max_chars)) - 1
        while room >= MIN_TEXT and text:
            cut = _render(head, key, [*kept, {**item, "text": text[:room] + "…"}], total - n, total, max_chars)
            if len(cut) <= max_chars:
                return cut
            room -= len(cut) - max_chars
        return _fit(_render(head, key, kept, total - n, total, max_chars), total - n, total, max_chars)
    return _render(head, key, kept, 0, total, max_chars)


def _fit(text: str, left: int, total: int, max_chars: int) -> str:
    """``text`` when it fits; else only the note (a head too large to carry any item)."""
    if len(text) <= max_chars:
        return text
    return dumps({"truncated": f"{left} of {total} cut or left out to stay within max_chars={max_chars}"})


def cite(chunk_id: str, package_path: str, citation: str, metadata: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {"chunk_id": chunk_id, "package_path": package_path, "citation": citation}
    for name in CITED_METADATA:
        if name in metadata and isinstance(metadata[name], str | int | float):
            data[name] = metadata[name]
    return data


def search(
    store: Store,
    family: str,
    query: str,
    k: int,
    mode: str,
    filter: dict[str, Any] | None,
    package: str | None,
    max_chars: int,
) -> str:
    check_max_chars(max_chars)
    hits = store.search(family, query, k=k, mode=mode, metadata=filter, package=package)
    items = [
        {
            **cite(hit.chunk_id, hit.package_path, hit.citation, hit.metadata),
            "score": round(hit.score, 6),
            "text": hit.text,
            "metadata": hit.metadata,
        }
        for hit in hits
    ]
    return bounded({"family": family, "mode": mode}, "hits", items, max_chars)


def list_families(store: Store, max_chars: int) -> str:
    items = [
        {
            "name": f.name,
            "backend": f.backend,
            "model": f.model,
            "dim": f.dim,
        }
        for f in store.families()
    ]
    return bounded({}, "families", items, max_chars)


def get_chunks(store: Store, family: str, ids: Sequence[str], max_chars: int) -> str:
    check_max_chars(max_chars)
    if not ids:
        raise InvalidInput("ids: give at least one chunk id")
    if len(ids) > MAX_IDS:
        raise InvalidInput(f"ids: at most {MAX_IDS} chunk ids in one call, not {len(ids)}")
    result = store.get(family, list(ids))
    items = []
    for chunk in result.chunks:
        citation = (
            f"[{chunk.chunk_id}]"
            if chunk.chunk_id.startswith(f"{chunk.package_path}#")
            else f"[{chunk.package_path}#{chunk.chunk_id}]"
        )
        items.append(
            {
                **cite(chunk.chunk_id, chunk.package_path, citation, chunk.metadata),
                "text": chunk.text,
                "metadata": chunk.metadata,
            }
        )
    return bounded({"family": family, "missing": result.missing}, "chunks", items, max_chars)


def memory_recall(store: Store, agent: str, query: str, k: int, stores: Sequence[str] | None, max_chars: int) -> str:
    check_max_chars(max_chars)
    profile = _profile(agent, stores)
    result = store.memory.recall(profile, query, k)
    items = [hit.to_dict() for hit in result.hits]
    head = {"agent": result.agent, "pending": result.pending}
    return bounded(head, "hits", items, max_chars)


def memory_add(
    store: Store,
    agent: str,
    store_name: str,
    content: str,
    tags: Sequence[str],
    salience: float | None,
    confidence: float | None,
) -> str:
    record: dict[str, Any] = {"agent": agent, "store": store_name, "content": content, "tags": list(tags)}
    if salience is not None:
        record["salience"] = salience
    if confidence is not None:
        record["confidence"] = confidence
    result = store.memory.add([record])
    return dumps({"agent": agent, "added": result.added, "existing": result.existing})


def _profile(agent: str, stores: Sequence[str] | None) -> Any:
    from pydantic import ValidationError

    from ragstore.memory.models import ALL_STORES, AgentProfile

    try:
        return AgentProfile.model_validate(
            {"agent": agent, "stores": list(stores) if stores else [s.value for s in ALL_STORES]}
        )
    except ValidationError as exc:
        problem = exc.errors()[0]
        field = ".".join(str(p) for p in problem["loc"]) or "agent"
        raise InvalidInput(f"field '{field}': {problem['msg']}") from None


def memory_compose(
    store: Store, agent: str, stores: Sequence[str] | None, task_hint: str | None, max_chars: int
) -> str:
    """The composed memory of ``agent`` as Markdown (``ragstore memory compose``), cut to ``max_chars``."""
    check_max_chars(max_chars)
    bundle = store.memory.compose(_profile(agent, stores), task_hint=task_hint)
    text = str(bundle.to_markdown())
    for failure in bundle.failures:
        text += f"\nwarning: store {failure.store.value} unavailable: {failure.error}: {failure.message}"
    if len(text) <= max_chars:
        return text
    note = f"\n… (cut to stay within max_chars={max_chars}; recall by query with memory_recall)"
    return text[: max_chars - len(note)] + note
