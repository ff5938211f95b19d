"""Pictures of eval results: PNG files written, empty input refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragstore.errors import InvalidInput
from ragstore.evaluation.metrics import Report
from ragstore.evaluation.runner import EvalResult, ModeResult, ModeSpec

plot = pytest.importorskip("ragstore.evaluation.plot")
pytest.importorskip("matplotlib")

PNG = b"\x89PNG\r\n\x1a\n"


def _result(modes: int) -> EvalResult:
    report = Report(k=10, evaluated=1, recall=0.5, precision=0.1, mrr=0.5, ndcg=0.4, hit=1.0)
    return EvalResult("docs", 10, 1, 0.0, [ModeResult(ModeSpec("hnsw"), report, [1.0]) for _ in range(modes)])


@pytest.mark.slow
def test_plot_modes_writes_a_png(tmp_path: Path) -> None:
    out = plot.plot_modes(_result(2), tmp_path / "m.png")
    assert out.read_bytes()[:8] == PNG


def test_plot_recall_curve_writes_a_png_in_ef_order(tmp_path: Path) -> None:
    out = plot.plot_recall_curve([(100, 0.99, 2.0), (10, 0.8, 1.0)], tmp_path / "r.png")
    assert out.read_bytes()[:8] == PNG


def test_nothing_to_draw_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        plot.plot_modes(_result(0), tmp_path / "m.png")
    with pytest.raises(InvalidInput):
        plot.plot_recall_curve([], tmp_path / "r.png")


def test_an_unwritable_path_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot write the plot"):
        plot.plot_modes(_result(1), tmp_path / "missing-dir" / "m.png")
