"""Memory composition: recency, not similarity (docs/decisions.md, "Agent memory").

:func:`compose_memory` reads each store the binding declares, keeps the records that pass the store's
floors (and, for semantic and procedural, contain the task hint), orders them newest first with ``id``
ascending on ties, and cuts each store to its cap. It is pure over what the readers return: no clock
(``now`` is passed in), no randomness, and no dependence on the order a reader yields records in.

Failure is contained per store: a reader that raises — when called or while its records are iterated —
contributes nothing, and the failure (store, error class, message) is listed beside the bundle.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import get_args

from ragstore.common.moments import check_aware
from ragstore.memory.binding import Binding, Reader, ReadRequest
from ragstore.memory.bundle import (
    Bundle,
    ReadFailure,
    Rejection,
    RejectionReason,
    canonical_bytes,
    record_to_dict,
)
from ragstore.memory.models import DEFAULT_POLICY, CompositionPolicy, MemoryRecord, Store, StorePolicy

__all__ = ["compose_memory", "normalize_hint", "order_key"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_MAX_MESSAGE = 1000
_REASONS: tuple[RejectionReason, ...] = get_args(RejectionReason)


def order_key(record: MemoryRecord) -> tuple[int, str]:
    """Sort key of composition order: ``at`` descending (exact, in integer microseconds), ``id`` ascending.

    ``id`` compares by code point, as ``COLLATE "C"`` does in Postgres (a locale collation would not).
    """
    return (-((record.at - _EPOCH) // _MICROSECOND), record.id)


def normalize_hint(task_hint: str | None) -> str | None:
    """The hint as the composer matches it: stripped and casefolded; ``None`` when absent or blank."""
    if task_hint is None or not task_hint.strip():
        return None
    return task_hint.strip().casefold()


def compose_memory(
    binding: Binding,
    *,
    now: datetime,
    task_hint: str | None = None,
    policy: CompositionPolicy = DEFAULT_POLICY,
) -> Bundle:
    """Compose the memory of ``binding.agent`` from the binding's readers, as of ``now``.

    Promises, per declared store (undeclared stores have no reader in a :class:`Binding`, so they are
    never read and never appear): records with ``at > now`` are ignored; the store's floors apply
    (inclusive); on the stores in ``policy.hint_stores`` (semantic and procedural by default) a
    non-blank ``task_hint`` keeps only records whose content contains it, compared casefolded; the
    survivors are ordered by :func:`order_key`, deduplicated by ``id`` (the first in order stays) and
    cut to the cap. Records of another agent or another store, and objects that are not records, are
    dropped and counted in ``Bundle.rejections``. The result depends only on the records returned, not
    on the order readers return them in, so its canonical JSON is byte-identical for the same records.

    Never raises because of a reader: an ``Exception`` from ``read`` or from iterating its result makes
    that store empty and is listed in ``Bundle.failures`` (``BaseException``s such as
    ``KeyboardInterrupt`` propagate). Raises :class:`~ragstore.errors.InvalidInput` — before reading
    anything — only when ``now`` is naive, a caller bug no reader could be blamed for.
    """
    check_aware("compose_memory: now", now)
    hint = normalize_hint(task_hint)
    raw_hint = task_hint.strip() if hint is not None and task_hint is not None else None
    records: dict[Store, tuple[MemoryRecord, ...]] = {}
    failures: list[ReadFailure] = []
    rejections: list[Rejection] = []
    for store, reader in binding.readers.items():
        store_policy = policy.for_store(store)
        hinted = store in policy.hint_stores
        request = ReadRequest(
            store=store,
            agent=binding.agent,
            limit=store_policy.cap,
            not_after=now,
            min_salience=store_policy.min_salience,
            min_confidence=store_policy.min_confidence,
            task_hint=raw_hint if hinted else None,
        )
        try:
            kept, counts = _read_store(reader, request, store_policy, hint if hinted else None)
        except Exception as exc:  # a failing store degrades to empty; memory never breaks the call
            records[store] = ()
            failures.append(ReadFailure(store=store, error=type(exc).__name__, message=_message(exc)))
            continue
        records[store] = kept
        rejections.extend(
            Rejection(store=store, reason=reason, count=counts[reason]) for reason in _REASONS if counts[reason]
        )
    return Bundle(agent=binding.agent, records=records, failures=tuple(failures), rejections=tuple(rejections))


def _read_store(
    reader: Reader, request: ReadRequest, store_policy: StorePolicy, hint: str | None
) -> tuple[tuple[MemoryRecord, ...], dict[RejectionReason, int]]:
    counts: dict[RejectionReason, int] = dict.fromkeys(_REASONS, 0)
    # Materialise inside the caller's try: a generator that fails half-way contributes nothing.
    items: Sequence[object] = list(reader.read(request))
    candidates: list[MemoryRecord] = []
    for item in items:
        if not isinstance(item, MemoryRecord):
            counts["not_a_record"] += 1
        elif item.agent != request.agent:
            counts["other_agent"] += 1
        elif item.store != request.store:
            counts["other_store"] += 1
        elif (
            item.at <= request.not_after
            and store_policy.admits(item)
            and (hint is None or hint in item.content.casefold())
        ):
            candidates.append(item)
    kept = _dedupe(sorted(candidates, key=order_key))
    counts["duplicate_id"] = len(candidates) - len(kept)
    return tuple(kept[: store_policy.cap]), counts


def _dedupe(ordered: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    """Keep the first record of each id; equal (at, id) pairs resolve by canonical bytes, not input order."""
    kept: list[MemoryRecord] = []
    seen: set[str] = set()
    for record in ordered:
        if record.id not in seen:
            seen.add(record.id)
            kept.append(record)
        elif order_key(kept[-1]) == order_key(record):
            # Same id, same instant, different body: pick one by content so reader order cannot leak in.
            if canonical_bytes(record_to_dict(record)) < canonical_bytes(record_to_dict(kept[-1])):
                kept[-1] = record
    return kept


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ fails must not make compose fail
        text = "<unprintable message>"
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"
