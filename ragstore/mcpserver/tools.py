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
from ragstore.search.rerank import DEFAULT_DEPTH, HttpReranker
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
    rerank: str | None = None,
    mmr_lambda: float = 0.5,
    reranker: HttpReranker | None = None,
    rerank_depth: int = DEFAULT_DEPTH,
) -> str:
    """``rerank="cross"`` reorders the first ``rerank_depth`` hits with ``reranker``, the cross-encoder the
    server was started with (InvalidInput when it was started without one)."""
    check_max_chars(max_chars)
    cross: dict[str, Any] = {}
    if rerank == "cross":
        if reranker is None:
            raise InvalidInput("rerank cross: this server has no reranker (start ragstore mcp with --reranker-url)")
        cross = {"reranker": reranker, "rerank_depth": rerank_depth}
    hits = store.search(
        family, query, k=k, mode=mode, metadata=filter, package=package, rerank=rerank, mmr_lambda=mmr_lambda, **cross
    )
    items = [
        {
            **cite(hit.chunk_id, hit.package_path, hit.citation, hit.metadata),
            "score": round(hit.score, 6),
            **({} if hit.rerank_score is None else {"rerank_score": round(hit.rerank_score, 6)}),
            "text": hit.text,
            "metadata": hit.metadata,
        }
        for hit in hits
    ]
    head: dict[str, Any] = {"family": family, "mode": mode}
    if rerank:
        head["rerank"] = rerank
    return bounded(head, "hits", items, max_chars)


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
        citation = _citation(chunk.chunk_id, chunk.package_path)
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


CHARS_PER_TOKEN = 4  # the context pack's own estimate (ragstore/context/canonical.py)
SHED_ROUNDS = 6


def context_pack(
    store: Store,
    brief: str,
    family: str | None,
    query: str | None,
    k: int,
    mode: str,
    rerank: str | None,
    mmr_lambda: float,
    summaries: Sequence[str],
    constraints: Sequence[str],
    artifacts: Sequence[str],
    max_tokens: int | None,
    fmt: str,
    max_chars: int,
) -> str:
    """A context pack (``ragstore context-pack``) built from the hits of ``query`` in ``family`` (its L3
    snippets) and the given summaries, constraints and artifacts; nothing is read from the server's disk.

    The pack's budget is ``max_tokens`` (default ``max_chars / 4``) and is enforced by the pack's own
    shedding (lowest-ranked snippets first, then whole layers, never L0); when the answer is still over
    ``max_chars`` the budget is lowered and the pack shed again. The answer cites every snippet kept.
    """
    from ragstore.context.builder import BuildError, build_context_pack
    from ragstore.context.render import render_markdown
    from ragstore.context.retrieval import hits_to_snippets
    from ragstore.context.shed import shed_within_layers

    check_max_chars(max_chars)
    if (family is None) != (query is None):
        raise InvalidInput("context_pack: give family and query together to retrieve snippets, or neither")
    hits = []
    if family is not None and query is not None:
        hits = store.search(family, query, k=k, mode=mode, rerank=rerank, mmr_lambda=mmr_lambda)
    lam = mmr_lambda if rerank == "mmr" else None
    snippets = hits_to_snippets(hits, query or "", mode, rerank, lam)
    cited = {hit.citation: cite(hit.chunk_id, hit.package_path, hit.citation, hit.metadata) for hit in hits}
    budget = max_tokens if max_tokens is not None else max(1, max_chars // CHARS_PER_TOKEN)
    spec = {
        "brief": brief,
        "snippets": snippets,
        "summaries": list(summaries),
        "constraints": list(constraints),
        "artifacts": list(artifacts),
        "max_tokens": budget,
    }
    built = build_context_pack(spec)
    if isinstance(built, BuildError):
        raise InvalidInput(built.message())
    whole = built.pack
    answer = ""
    for _ in range(SHED_ROUNDS):
        pack = shed_within_layers(whole, budget)
        snippets_kept = pack.layers.L3 or []
        head: dict[str, Any] = {
            "pack_id": pack.pack_id,
            "budget": pack.budget.model_dump(),
            "citations": [cited[s.ref] for s in snippets_kept if s.ref in cited],
        }
        if pack.shed is not None and (pack.shed.dropped_items or pack.shed.dropped_layers):
            head["shed"] = {
                "dropped_snippets": [item.ref for item in pack.shed.dropped_items if item.layer == "L3"],
                "dropped_layers": list(pack.shed.dropped_layers),
            }
        body = render_markdown(pack) if fmt == "markdown" else pack.model_dump(mode="json")
        answer = dumps({**head, "markdown" if fmt == "markdown" else "pack": body})
        if len(answer) <= max_chars:
            return answer
        budget = max(1, int(budget * max_chars / len(answer) * 0.9))
    return _fit(answer, len(snippets), len(snippets), max_chars)


MAX_TEXTS = 100
MAX_TEXT_CHARS = 200_000


def index_text(store: Store, family: str, texts: Sequence[dict[str, Any]]) -> str:
    """Index ``texts`` (each ``package_path``, ``text``, optional ``chunk_id`` and ``metadata``) into
    ``family`` through :meth:`Store.index`: validated whole before anything is written, never pruning.
    A text without ``chunk_id`` gets ``<package_path>#<first 16 hex of its SHA-256>``, so sending the same
    text again changes nothing."""
    import hashlib

    if not texts:
        raise InvalidInput("texts: give at least one text")
    if len(texts) > MAX_TEXTS:
        raise InvalidInput(f"texts: at most {MAX_TEXTS} in one call, not {len(texts)}")
    records = []
    for n, item in enumerate(texts, start=1):
        text = str(item.get("text") or "")
        if len(text) > MAX_TEXT_CHARS:
            raise InvalidInput(f"record {n}: text: at most {MAX_TEXT_CHARS} characters in one call")
        record = {key: value for key, value in item.items() if value is not None}
        if not record.get("chunk_id"):
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
            record["chunk_id"] = f"{item.get('package_path')}#{digest}"
        records.append(record)
    report = store.index(records, family).as_dict()
    report.pop("sources", None)
    return dumps({**report, "chunk_ids": [r["chunk_id"] for r in records]})


FAMILIES_URI = "ragstore://families"
FAMILY_URI = "ragstore://families/{name}"
RESOURCE_CHUNKS = 100  # chunk ids a family's resource lists (its first page; get_chunks fetches them)


def families_resource(store: Store) -> str:
    """The ``ragstore://families`` resource: each family with the URI of its own resource."""
    items = [
        {"name": f.name, "uri": FAMILY_URI.format(name=f.name), "backend": f.backend, "model": f.model, "dim": f.dim}
        for f in store.families()
    ]
    return bounded({}, "families", items, DEFAULT_MAX_CHARS)


def family_uris(store: Store) -> list[tuple[str, str, str]]:
    """Each family's resource as (URI, name, one-line description), for ``resources/list``."""
    return [
        (
            FAMILY_URI.format(name=f.name),
            f.name,
            f"Family {f.name}: {f.backend} {f.model}, dimension {f.dim}, {f.storage} storage",
        )
        for f in store.families()
    ]


def family_resource(store: Store, name: str) -> str:
    """The ``ragstore://families/{name}`` resource: the family's settings, its counts and its first chunks."""
    family = store.family(name)
    page = store.list_chunks(name, limit=RESOURCE_CHUNKS)
    head = {
        "name": family.name,
        "backend": family.backend,
        "model": family.model,
        "dim": family.dim,
        "storage": family.storage,
        "state": family.state,
        "chunks_total": page.total,
        "packages": page.packages,
    }
    items = [
        {"chunk_id": c.chunk_id, "package_path": c.package_path, "citation": _citation(c.chunk_id, c.package_path)}
        for c in page.chunks
    ]
    if page.next is not None:
        head["more"] = f"{page.total - len(items)} more chunks; search the family or fetch ids with get_chunks"
    return bounded(head, "chunks", items, DEFAULT_MAX_CHARS)


def _citation(chunk_id: str, package_path: str) -> str:
    return f"[{chunk_id}]" if chunk_id.startswith(f"{package_path}#") else f"[{package_path}#{chunk_id}]"
