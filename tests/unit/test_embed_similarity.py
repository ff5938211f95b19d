"""Cosine similarity and ranking of texts (the library behind ``ragstore embed similarity|rank``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragstore.embed.offline import OfflineBackend
from ragstore.embed.similarity import RankedText, rank_texts, similarity

CLI = Path(__file__).resolve().parents[2] / "ragstore" / "cli"


class TableBackend:
    """Embeds each text as the vector the table gives it."""

    name = "table"
    model = "table-v1"
    dim = 2

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.table[t] for t in texts], dtype=np.float32)


def test_similarity_is_the_cosine_and_zero_for_a_zero_vector() -> None:
    backend = TableBackend({"x": [1.0, 0.0], "y": [1.0, 1.0], "zero": [0.0, 0.0]})
    assert similarity(backend, "x", "x") == pytest.approx(1.0)
    assert similarity(backend, "x", "y") == pytest.approx(1 / np.sqrt(2))
    assert similarity(backend, "x", "zero") == 0.0
    assert similarity(OfflineBackend(), "pg_dump", "pg_dump") == pytest.approx(1.0, abs=1e-6)


def test_rank_is_highest_first_with_ties_in_input_order() -> None:
    backend = TableBackend({"q": [1.0, 0.0], "a": [0.0, 1.0], "b": [2.0, 0.0], "c": [1.0, 0.0], "d": [1.0, 1.0]})
    assert rank_texts(backend, "q", ["a", "b", "c", "d"]) == [
        RankedText(1, 1, pytest.approx(1.0), "b"),  # type: ignore[arg-type]
        RankedText(2, 2, pytest.approx(1.0), "c"),  # type: ignore[arg-type]
        RankedText(3, 3, pytest.approx(1 / np.sqrt(2)), "d"),  # type: ignore[arg-type]
        RankedText(4, 0, 0.0, "a"),
    ]


def test_the_cli_holds_no_numeric_logic() -> None:
    # cli/ parses options and prints; cosine, ranking and other numeric work live in the library.
    offenders = [p.name for p in sorted(CLI.glob("*.py")) if "import numpy" in p.read_text(encoding="utf-8")]
    assert offenders == []
