"""`ragstore context-pack`: options, byte-identical output, --retrieve, --verify, --shed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import ragstore.cli.context as cli_context
from ragstore.cli.context import context_pack
from ragstore.errors import InvalidInput
from ragstore.search.request import Hit

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "context"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("def a():\n    return 1\n")
    (tmp_path / "src" / "b.py").write_text("B = 'ção'\n")
    (tmp_path / "notes.md").write_text("# notes\n")
    return tmp_path


def _run(args: list[str], cwd: Path | None = None) -> Result:
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(context_pack, args, catch_exceptions=False)
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(context_pack, args, catch_exceptions=False)
    finally:
        os.chdir(old)


def _base(repo: Path) -> list[str]:
    return [
        "--brief", "Fix a()", "--repo", str(repo),
        "--file", str(repo / "src" / "a.py"), "--file", str(repo / "src" / "b.py"),
        "--summary", "a returns one", "--constraint", "no new deps", "--artifact", "out/report.json",
        "--state", str(DATA / "state.json"), "--budget", "5000",
    ]  # fmt: skip


def test_pack_has_all_layers_with_paths_relative_to_the_repo(repo: Path) -> None:
    result = _run(_base(repo))
    pack = json.loads(result.stdout)
    layers = pack["layers"]
    assert layers["L0"] == "Fix a()"
    assert layers["L1"] == ["notes.md", "src/a.py", "src/b.py"]
    assert [f["path"] for f in layers["L2"]] == ["src/a.py", "src/b.py"]
    assert layers["L5"]["phase"] == "review"
    assert layers["L6"] == {"artifacts": ["out/report.json"], "constraints": ["no new deps"]}
    assert [e["path"] for e in layers["L7"]] == ["src/a.py", "src/b.py"]
    assert pack["budget"]["max_tokens"] == 5000 and pack["budget"]["within_budget"]


def test_output_is_canonical_json(repo: Path) -> None:
    out = _run(_base(repo)).stdout_bytes.rstrip(b"\n")
    data = json.loads(out)
    assert out == json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_without_retrieve_the_pack_is_byte_identical_to_one_without_retrieval_options(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any) -> list[Hit]:
        raise AssertionError("no retrieval without --retrieve")

    monkeypatch.setattr(cli_context, "_retrieve", refuse)
    plain = _run(_base(repo)).stdout_bytes
    with_options = _run(
        [*_base(repo), "--family", "docs", "-k", "3", "--mode", "exact", "--rerank", "mmr", "--lambda", "0.9"]
    ).stdout_bytes
    assert plain == with_options


def test_retrieve_fills_l3_with_reasons_and_citations(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    def fake(
        ctx_obj: object, family: str, query: str, k: int, mode: str, rerank: str | None, lam: float, remote: object
    ) -> list[Hit]:
        calls.append((family, query, k, mode, rerank, lam))
        return [Hit("c1", "docs/x.md", 0.8312, "first"), Hit("c7", "docs/y.md", 0.5, "second")]

    monkeypatch.setattr(cli_context, "_retrieve", fake)
    args = [
        *_base(repo),
        "--retrieve",
        "QUERY",
        "--family",
        "docs",
        "-k",
        "2",
        "--rerank",
        "mmr",
        "--lambda",
        "0.5",
    ]
    snippets = json.loads(_run(args).stdout)["layers"]["L3"]
    assert calls == [("docs", "QUERY", 2, "hybrid", "mmr", 0.5)]
    assert snippets[0] == {
        "ref": "[docs/x.md#c1]",
        "text": "first",
        "reason": 'retrieved for "QUERY": rank 1, score 0.83, hybrid, mmr λ=0.5',
    }
    assert snippets[1]["reason"] == 'retrieved for "QUERY": rank 2, score 0.50, hybrid, mmr λ=0.5'


def test_retrieve_needs_a_family(repo: Path) -> None:
    result = CliRunner().invoke(context_pack, [*_base(repo), "--retrieve", "q"])
    assert result.exit_code == 2 and "--family" in result.output


def test_budget_excludes_model_and_role(repo: Path) -> None:
    result = CliRunner().invoke(context_pack, [*_base(repo), "--model", "m"])
    assert result.exit_code == 2 and "--budget excludes" in result.output


def test_budget_from_model_then_role_then_default(repo: Path) -> None:
    args = ["--brief", "t", "--budgets", str(DATA / "budgets.toml")]
    assert json.loads(_run([*args, "--model", "gpt-4o-mini"]).stdout)["budget"]["max_tokens"] == 64000
    assert json.loads(_run([*args, "--model", "x", "--role", "reviewer"]).stdout)["budget"]["max_tokens"] == 16000
    assert json.loads(_run(args).stdout)["budget"]["max_tokens"] == 8000


def test_invalid_input_is_a_ragstore_error_naming_the_layer(repo: Path) -> None:
    with pytest.raises(InvalidInput, match=r"summaries\[0\] \(L4\)"):
        _run(["--brief", "t", "--summary", "  "])


def test_shed_drops_layers_and_records_it(repo: Path) -> None:
    pack = json.loads(_run([*_base(repo)[:-2], "--budget", "40", "--shed"]).stdout)
    assert "L7" not in pack["layers"] and pack["shed"]["dropped_layers"][0] == "L7"
    assert pack["budget"]["within_budget"] is pack["shed"]["fits"]


def test_shed_within_layers_drops_the_largest_file_first(repo: Path) -> None:
    (repo / "src" / "a.py").write_text("x = 1\n" * 200)
    pack = json.loads(_run([*_base(repo)[:-2], "--budget", "300", "--shed-within-layers"]).stdout)
    assert pack["shed"]["strategy"] == "within-layers"
    assert pack["shed"]["dropped_items"] == [{"layer": "L2", "ref": "src/a.py"}]
    assert pack["shed"]["dropped_layers"] == [] and pack["budget"]["within_budget"]


def test_markdown_format_renders_headings(repo: Path) -> None:
    text = _run([*_base(repo), "--format", "markdown"]).stdout
    assert "## L0 · Brief\n\nFix a()" in text and "## L7 · Manifest" in text


def test_out_then_verify_names_the_file_whose_byte_changed(repo: Path, tmp_path_factory: Any) -> None:
    out = tmp_path_factory.mktemp("out") / "pack.json"
    first = _run([*_base(repo), "--out", str(out)])
    assert first.stdout == "" and "wrote" in first.stderr
    ok = _run(["--verify", str(out), "--repo", str(repo)])
    assert ok.exit_code == 0 and ok.stdout.strip().endswith("ok: 2 files checked")

    before = json.loads(out.read_bytes())
    (repo / "src" / "b.py").write_text("B = 'çãp'\n")  # one byte differs
    changed = CliRunner().invoke(context_pack, ["--verify", str(out), "--repo", str(repo)])
    assert changed.exit_code == 1
    assert "changed: src/b.py" in changed.stdout and "src/a.py" not in changed.stdout

    rebuilt = _run([*_base(repo), "--out", str(out)])
    assert rebuilt.exit_code == 0
    after = json.loads(out.read_bytes())
    assert after["pack_id"] != before["pack_id"] and after["manifest_id"] != before["manifest_id"]


def test_verify_json_reports_missing_files(repo: Path, tmp_path_factory: Any) -> None:
    out = tmp_path_factory.mktemp("out") / "pack.json"
    _run([*_base(repo), "--out", str(out)])
    (repo / "src" / "a.py").unlink()
    result = CliRunner().invoke(context_pack, ["--verify", str(out), "--repo", str(repo), "--format", "json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["missing"] == ["src/a.py"]


@pytest.mark.slow
def test_same_command_gives_same_bytes_across_processes(repo: Path) -> None:
    script = "import sys; from ragstore.cli.context import context_pack; context_pack.main(sys.argv[1:])"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "random"}
    outputs = [
        subprocess.run([sys.executable, "-c", script, *_base(repo)], capture_output=True, check=True, env=env).stdout
        for _ in range(2)
    ]
    assert outputs[0] == outputs[1] == _run(_base(repo)).stdout_bytes
    assert json.loads(outputs[0])["pack_id"]
