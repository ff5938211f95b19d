"""Document chunk ids in tests: ``docs/a.md#<16 hex>`` shown as ``docs/a.md#`` (the hex is a hash of the
chunk's heading path and text: :func:`ragstore.ingest.chunker.chunk_ids`); other ids unchanged."""

from __future__ import annotations

import re

_ANCHORED = re.compile(r"#[0-9a-f]{16}(-[0-9]+)?$")


def doc(chunk_id: str) -> str:
    return _ANCHORED.sub("#", chunk_id)
