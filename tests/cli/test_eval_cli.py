"""`ragstore eval` end to end on a tiny dataset: table, A/B deltas, JSON file, plot, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragstore import families
from ragstore.cli.eval import eval_command
from ragstore.cli.main import AppContext, RagstoreGroup
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records

TEXTS = {
    "cp#0": "cp copies files and directories",
    "mv#0": "mv moves and renames files",
    "rm#0": "rm removes files or directories",
    "ls#0": "ls lists directory contents",
}


@pytest.fixture
def dataset(conn: Any, tmp_path: Path) -> Path:
    backend = OfflineBackend()
    fam = families.create_family(conn, "docs", backend)
    write_records(
        conn, fam, backend, [(k, ChunkRecord(chunk_id=k, package_path=k[:2], text=v)) for k, v in TEXTS.items()]
    )
    queries = [("q1", "copy files and directories"), ("q2", "rename files"), ("q3", "list directory contents")]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps({"query_id": q, "text": t}) + "\n" for q, t in queries))
    (tmp_path / "qrels.tsv").write_text("q1\tcp#0\t2\nq2\tmv#0\t1\nq3\tls#0\t1\n")
    return tmp_path


def invoke(dsn: str, args: list[str]) -> Any:
    group = RagstoreGroup("ragstore")
    group.add_command(eval_command)
    return CliRunner().invoke(group, args, obj=AppContext(dsn=dsn, debug=False), catch_exceptions=False)


def test_eval_prints_a_table_per_mode_with_deltas_and_writes_json(dsn: str, dataset: Path) -> None:
    out = dataset / "out.json"
    args = ["eval", "docs", "--queries", str(dataset / "q.jsonl"), "--qrels", str(dataset / "qrels.tsv")]
    result = invoke(dsn, [*args, "--mode", "exact", "--mode", "fts", "--mode", "hybrid", "-k", "3", "--json", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["mode", "recall@3", "precision@3"]
    assert [line.split()[0] for line in lines[1:4]] == ["exact", "fts", "hybrid"]
    assert any(line.startswith("Δ fts") for line in lines) and "3 queries, 3 evaluated" in result.output
    data = json.loads(out.read_text())
    assert [m["label"] for m in data["modes"]] == ["exact", "fts", "hybrid"]
    fts = data["modes"][1]
    assert fts["metrics"]["hit"] == 1.0  # every query's words are in its chunk
    assert fts["deltas"]["hit"] == round(fts["metrics"]["hit"] - data["modes"][0]["metrics"]["hit"], 4)


def test_weights_sweep_adds_hybrid_runs_and_json_to_stdout(dsn: str, dataset: Path) -> None:
    args = ["eval", "docs", "--queries", str(dataset / "q.jsonl"), "--qrels", str(dataset / "qrels.tsv")]
    result = invoke(
        dsn, [*args, "--mode", "fts", "--weights", "fts=1,vector=0", "--weights", "fts=0,vector=1", "--json", "-"]
    )
    data = json.loads(result.output)
    labels = [m["label"] for m in data["modes"]]
    assert labels == ["fts", "hybrid[fts=1,vector=0]", "hybrid[fts=0,vector=1]"]
    # a zero-weight vector leg leaves the full-text order: same metrics as fts alone
    assert data["modes"][1]["metrics"] == data["modes"][0]["metrics"]


def test_default_mode_is_the_search_default_and_plot_is_drawn(dsn: str, dataset: Path) -> None:
    pytest.importorskip("matplotlib")
    png = dataset / "m.png"
    args = ["eval", "docs", "--queries", str(dataset / "q.jsonl"), "--qrels", str(dataset / "qrels.tsv")]
    result = invoke(dsn, [*args, "--plot", str(png)])
    assert result.output.splitlines()[1].split()[0] == "auto"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_matplotlib_is_one_clear_error(dsn: str, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name: str, *a: Any, **kw: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    args = ["eval", "docs", "--queries", str(dataset / "q.jsonl"), "--qrels", str(dataset / "qrels.tsv")]
    result = CliRunner().invoke(
        _group(), [*args, "--plot", str(dataset / "m.png")], obj=AppContext(dsn=dsn, debug=False)
    )
    assert result.exit_code == 1 and "pip install 'ragstore[plot]'" in result.output


def test_unknown_family_is_one_clear_error(dsn: str, dataset: Path) -> None:
    args = ["eval", "nope", "--queries", str(dataset / "q.jsonl"), "--qrels", str(dataset / "qrels.tsv")]
    result = CliRunner().invoke(_group(), args, obj=AppContext(dsn=dsn, debug=False))
    assert result.exit_code == 1 and "no family named 'nope'" in result.output


def _group() -> RagstoreGroup:
    group = RagstoreGroup("ragstore")
    group.add_command(eval_command)
    return group


def test_blend_and_mmr_reranks_run_and_blend_refuses_non_hybrid(dsn: str, dataset: Path) -> None:
    args = ["eval", "docs", "--queries", str(dataset / "q.jsonl"), "--qrels", str(dataset / "qrels.tsv")]
    data = json.loads(invoke(dsn, [*args, "--mode", "hybrid", "--rerank", "blend", "--json", "-"]).output)
    assert data["modes"][0]["label"] == "hybrid+blend" and data["modes"][0]["evaluated"] == 3
    data = json.loads(invoke(dsn, [*args, "--mode", "fts", "--rerank", "mmr", "--json", "-"]).output)
    assert data["modes"][0]["label"] == "fts+mmr" and data["modes"][0]["metrics"]["hit"] == 1.0
    result = CliRunner().invoke(_group(), [*args, "--mode", "fts", "--rerank", "blend"], obj=AppContext(dsn, False))
    assert result.exit_code == 1 and "hybrid" in result.output
