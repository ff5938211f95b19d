"""Shedding: the explicit step a caller takes when a pack is over budget. The builder never sheds.

Two strategies, both pure and deterministic:

* :func:`shed` drops whole layers, L7 first, then L6, L5 … down to L1, and stops as soon as the pack fits.
  L0 (the brief) is never dropped nor truncated: if L0 alone is over budget the report says so.
* :func:`shed_within_layers` first drops L3 snippets from the lowest-ranked (last) up, then L2 files from
  the largest (bytes) down, each with its L7 entry, and only then falls back to :func:`shed`'s whole layers.

Sizes are tracked arithmetically (the canonical JSON of a list is ``[`` + items joined by ``,`` + ``]``) so
shedding many items stays linear; the final budget report is always recomputed from the real JSON.
"""

from __future__ import annotations

from ragstore.context.builder import assemble_pack
from ragstore.context.canonical import canonical_json, tokens_for_length
from ragstore.context.models import (
    LAYER_NAMES,
    ContextPack,
    DroppedItem,
    FileEntry,
    LayerName,
    Layers,
    ManifestEntry,
    ShedReport,
    Snippet,
)
from ragstore.errors import InvalidInput

__all__ = ["SHED_ORDER", "shed", "shed_within_layers"]

SHED_ORDER: tuple[LayerName, ...] = tuple(reversed(LAYER_NAMES[1:]))  # L7, L6, …, L1; never L0


def _check_budget(max_tokens: int) -> None:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidInput(f"max_tokens must be an integer >= 1, got {max_tokens!r}")


def _layers_length(lengths: dict[str, int]) -> int:
    # {"L0":…,"L1":…}: two braces, '"Lk":' (5 characters) per layer, commas between layers.
    return 2 + sum(5 + n for n in lengths.values()) + max(0, len(lengths) - 1)


def _list_length(item_lengths_sum: int, count: int) -> int:
    return 2 + item_lengths_sum + max(0, count - 1)


def _fits(length: int, max_tokens: int) -> bool:
    return tokens_for_length(length) <= max_tokens


def _drop_layers(layers: Layers, max_tokens: int) -> tuple[Layers, list[LayerName]]:
    dumped = layers.model_dump(mode="json")
    lengths = {name: len(canonical_json(value)) for name, value in dumped.items()}
    dropped: list[LayerName] = []
    for name in SHED_ORDER:
        if _fits(_layers_length(lengths), max_tokens):
            break
        if name in lengths:
            del lengths[name]
            dropped.append(name)
    return layers.model_copy(update=dict.fromkeys(dropped)), dropped


def _report(
    pack: ContextPack,
    strategy: str,
    max_tokens: int,
    items: list[DroppedItem],
    layers: list[LayerName],
) -> ShedReport:
    previous = pack.shed
    return ShedReport(
        strategy="within-layers" if strategy == "within-layers" else "layers",
        from_pack_id=previous.from_pack_id if previous else pack.pack_id,
        from_estimated_tokens=previous.from_estimated_tokens if previous else pack.budget.estimated_tokens,
        max_tokens=max_tokens,
        dropped_items=[*(previous.dropped_items if previous else []), *items],
        dropped_layers=[*(previous.dropped_layers if previous else []), *layers],
        fits=True,
    )


def _finish(layers: Layers, max_tokens: int, report: ShedReport) -> ContextPack:
    result = assemble_pack(layers, max_tokens)
    fits = result.budget.within_budget
    note = ""
    if not fits:
        note = (
            f"even L0 alone needs {result.budget.estimated_tokens} tokens > max_tokens {max_tokens}; "
            "the brief is never truncated"
        )
    return result.model_copy(update={"shed": report.model_copy(update={"fits": fits, "note": note})})


def shed(pack: ContextPack, max_tokens: int) -> ContextPack:
    """Drop whole layers L7, L6, … L1 in that order until the pack fits ``max_tokens``; never L0.

    Returns a new pack (new ``pack_id``; ``manifest_id`` is ``None`` once L7 is gone) whose ``shed`` report
    lists the dropped layers and says whether it fits; ``fits`` is false only when L0 alone is over budget.
    A pack that already fits comes back with its layers unchanged and an empty report.
    Raises InvalidInput when ``max_tokens`` is not a positive integer.
    """
    _check_budget(max_tokens)
    layers, dropped = _drop_layers(pack.layers, max_tokens)
    return _finish(layers, max_tokens, _report(pack, "layers", max_tokens, [], dropped))


def shed_within_layers(pack: ContextPack, max_tokens: int) -> ContextPack:
    """Drop the lowest-ranked L3 snippets, then the largest L2 files, then whole layers, until it fits.

    Snippets go from the last (lowest rank) up; files by size in bytes, largest first (ties by path), each
    with its L7 entry so L7 stays the manifest of L2. Then, if still over budget, layers as :func:`shed`.
    The report lists every dropped item and layer. Raises InvalidInput for a bad ``max_tokens``.
    """
    _check_budget(max_tokens)
    layers = pack.layers
    dumped = layers.model_dump(mode="json")
    lengths = {name: len(canonical_json(value)) for name, value in dumped.items()}
    items: list[DroppedItem] = []

    snippets: list[Snippet] = list(layers.L3 or [])
    if layers.L3 is not None:
        sizes = [len(canonical_json(s)) for s in dumped["L3"]]
        total = sum(sizes)
        while snippets and not _fits(_layers_length(lengths), max_tokens):
            gone = snippets.pop()
            total -= sizes.pop()
            lengths["L3"] = _list_length(total, len(snippets))
            items.append(DroppedItem(layer="L3", ref=gone.ref))

    files: list[FileEntry] = list(layers.L2 or [])
    manifest: list[ManifestEntry] = list(layers.L7 or [])
    if layers.L2 is not None and not _fits(_layers_length(lengths), max_tokens):
        file_len = {f["path"]: len(canonical_json(f)) for f in dumped["L2"]}
        entry_len = {e["path"]: len(canonical_json(e)) for e in dumped.get("L7", [])}
        file_total, entry_total = sum(file_len.values()), sum(entry_len.values())
        keep_files = {f.path for f in files}
        keep_entries = {e.path for e in manifest}
        by_size = sorted(files, key=lambda f: (-len(f.content.encode("utf-8")), f.path))
        for victim in by_size:
            if _fits(_layers_length(lengths), max_tokens):
                break
            keep_files.discard(victim.path)
            file_total -= file_len[victim.path]
            lengths["L2"] = _list_length(file_total, len(keep_files))
            if victim.path in keep_entries:
                keep_entries.discard(victim.path)
                entry_total -= entry_len[victim.path]
                lengths["L7"] = _list_length(entry_total, len(keep_entries))
            items.append(DroppedItem(layer="L2", ref=victim.path))
        files = [f for f in files if f.path in keep_files]
        manifest = [e for e in manifest if e.path in keep_entries]

    update: dict[str, object] = {}
    if layers.L3 is not None:
        update["L3"] = snippets
    if layers.L2 is not None:
        update["L2"] = files
    if layers.L7 is not None:
        update["L7"] = manifest
    trimmed, dropped = _drop_layers(layers.model_copy(update=update), max_tokens)
    return _finish(trimmed, max_tokens, _report(pack, "within-layers", max_tokens, items, dropped))
