"""Columnar inputs: Parquet files and NumPy ``.npy`` matrices with a JSONL sidecar."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragstore.ingest.fast import OnePass
    from ragstore.ingest.readers import Source

COLUMNAR_KINDS = ("parquet", "npy")


def read_columnar(source: Source, one: OnePass) -> None:
    raise NotImplementedError(source.kind)
