"""Pictures of evaluation results: metrics per mode (bar chart), recall against ``ef_search`` with latency.

matplotlib is the optional extra ``plot`` (``pip install 'ragstore[plot]'``); it is imported only when a
picture is drawn, with the non-interactive ``Agg`` backend, so no display is needed. Both functions write
a PNG (or any format matplotlib infers from the suffix) and return the path.

Raises :class:`~ragstore.errors.InvalidInput` when matplotlib is missing (the message says how to install
it), when there is nothing to draw, or when the file cannot be written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragstore.errors import InvalidInput
from ragstore.evaluation.metrics import METRICS
from ragstore.evaluation.runner import EvalResult

__all__ = ["plot_modes", "plot_recall_curve"]

INSTALL_HINT = "pip install 'ragstore[plot]'"


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise InvalidInput(f"drawing a plot needs matplotlib, which is not installed: run {INSTALL_HINT}") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def require_matplotlib() -> None:
    """Raise InvalidInput (saying how to install it) when matplotlib is missing; call before long work."""
    _pyplot()


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    try:
        fig.savefig(target, dpi=120, bbox_inches="tight")
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot write the plot to {target}: {exc}") from exc
    return target


def plot_modes(result: EvalResult, path: str | os.PathLike[str]) -> Path:
    """Draw a grouped bar chart of every metric@k per mode, with mean latency in each legend label."""
    if not result.modes:
        raise InvalidInput("no mode to plot")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(METRICS)), 4.0))
    width = 0.8 / len(result.modes)
    for i, mode in enumerate(result.modes):
        values = [mode.report.as_dict()[name] for name in METRICS]
        xs = [j + (i - (len(result.modes) - 1) / 2) * width for j in range(len(METRICS))]
        bars = ax.bar(xs, values, width, label=f"{mode.spec.label} ({mode.mean_ms:.1f} ms)")
        ax.bar_label(bars, fmt="%.3f", fontsize=6, rotation=90, padding=2)
    ax.set_xticks(range(len(METRICS)), [f"{name}@{result.k}" for name in METRICS])
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("macro average")
    ax.set_title(f"ragstore eval: family {result.family}, {result.queries} queries")
    # below the axes: inside, it would cover the tallest bars
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=min(4, len(result.modes)))
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def plot_recall_curve(points: Sequence[tuple[int, float, float]], path: str | os.PathLike[str]) -> Path:
    """Draw recall@k against ``ef_search`` (left axis) with latency in ms (right axis).

    ``points`` are ``(ef_search, recall, latency_ms)`` triples, as ``check-recall`` measures them; they are
    drawn in ``ef_search`` order.
    """
    if not points:
        raise InvalidInput("no (ef_search, recall, latency) point to plot")
    plt = _pyplot()
    ordered = sorted(points)
    ef = [p[0] for p in ordered]
    fig, left = plt.subplots(figsize=(6.0, 4.0))
    left.plot(ef, [p[1] for p in ordered], marker="o", color="tab:blue", label="recall")
    left.set_xlabel("hnsw.ef_search")
    left.set_ylabel("recall", color="tab:blue")
    left.set_ylim(0, 1.02)
    right = left.twinx()
    right.plot(ef, [p[2] for p in ordered], marker="s", color="tab:orange", label="latency")
    right.set_ylabel("latency (ms)", color="tab:orange")
    left.set_title("HNSW recall against the exact search")
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)
