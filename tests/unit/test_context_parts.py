"""Context pack parts: budget selection, retrieval reasons, Markdown rendering, verification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragstore.context import (
    BudgetConfig,
    BuildOk,
    ContextPack,
    build_context_pack,
    hits_to_snippets,
    load_budget_config,
    render_markdown,
    retrieval_reason,
    select_token_budget,
    shed,
    verify,
)
from ragstore.context.sources import read_file_entry, repo_map
from ragstore.errors import InvalidInput, NotFound
from ragstore.search.request import Hit

DATA = Path(__file__).resolve().parents[1] / "data" / "context"


def test_budget_precedence_is_model_then_role_then_default() -> None:
    config = load_budget_config(DATA / "budgets.toml")
    assert select_token_budget("gpt-4o-mini", "reviewer", config) == 64000
    assert select_token_budget("unknown", "reviewer", config) == 16000
    assert select_token_budget("unknown", "unknown", config) == 8000
    assert select_token_budget(None, None, BudgetConfig()) == 8000


def test_budget_config_reads_json_too(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"default": 100, "roles": {"coder": 200}}))
    assert select_token_budget(None, "coder", load_budget_config(path)) == 200


@pytest.mark.parametrize("text", ["default = 0", "[models]\nx = true", "default = 'many'", "default = [", "x = 1"])
def test_bad_budget_file_is_invalid_input_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "budgets.toml"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=r"budgets\.toml"):
        load_budget_config(path)


def test_missing_budget_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        load_budget_config(tmp_path / "nope.toml")


def test_retrieval_reason_reads_like_the_spec() -> None:
    assert retrieval_reason("QUERY", 1, 0.8312, "hybrid", "mmr", 0.5) == (
        'retrieved for "QUERY": rank 1, score 0.83, hybrid, mmr λ=0.5'
    )
    assert retrieval_reason("q", 3, 0.5, "exact") == 'retrieved for "q": rank 3, score 0.50, exact'


def test_retrieval_reason_stays_one_line_for_awkward_queries() -> None:
    reason = retrieval_reason('say "hi"\nnow', 1, 0.1, "fts")
    assert "\n" not in reason and '"say \\"hi\\"\\nnow"' in reason


def test_hits_become_snippets_in_rank_order_with_their_citation() -> None:
    hits = [Hit("c9", "docs/a.md", 0.91, "alpha"), Hit("c2", "docs/b.md", 0.42, "beta")]
    snippets = hits_to_snippets(hits, "what", "hybrid", "mmr", 0.7)
    assert [s.ref for s in snippets] == ["[docs/a.md#c9]", "[docs/b.md#c2]"]
    assert [s.text for s in snippets] == ["alpha", "beta"]
    assert snippets[1].reason == 'retrieved for "what": rank 2, score 0.42, hybrid, mmr λ=0.7'


def _pack(files: dict[str, str], **extra: object) -> ContextPack:
    spec = {
        "brief": "task",
        "files": [{"path": p, "content": c} for p, c in files.items()],
        "max_tokens": 10_000,
        **extra,
    }
    result = build_context_pack(spec)
    assert isinstance(result, BuildOk)
    return result.pack


def test_markdown_renders_each_layer_under_its_heading_in_order() -> None:
    pack = _pack(
        {"a.py": "x = '```'\n"},
        snippets=[{"ref": "[d#1]", "text": "t", "reason": "why"}],
        summaries=["s"],
        state={"phase": "p"},
        constraints=["c"],
        artifacts=["art"],
        repo_map=["a.py"],
    )
    text = render_markdown(pack)
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert [h.split()[1] for h in headings] == ["L0", "L1", "L2", "L3", "L4", "L5", "L6", "L7"]
    assert "````py\nx = '```'\n````" in text  # fence longer than the content's backticks
    assert text == render_markdown(pack)


def test_markdown_leaves_out_shed_layers_and_says_so() -> None:
    pack = _pack({"a.py": "x\n" * 100})
    text = render_markdown(shed(pack, 5))
    assert "## L7" not in text and "## L0" in text and "shed (layers)" in text


def test_verify_passes_when_nothing_changed_and_names_changed_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / "b.py").write_text("b = 2\n")
    files = [read_file_entry(tmp_path / name, tmp_path) for name in ("a.py", "b.py")]
    pack = _pack({f.path: f.content for f in files})
    assert verify(pack, tmp_path).ok
    (tmp_path / "a.py").write_text("a = 2\n")  # one byte
    (tmp_path / "b.py").unlink()
    report = verify(pack, tmp_path)
    assert not report.ok
    assert report.changed == ("a.py",) and report.missing == ("b.py",)
    assert report.pack_id_ok and report.manifest_id_ok


def test_verify_detects_an_edited_pack() -> None:
    pack = _pack({"a.py": "a\n"})
    edited = pack.model_copy(update={"layers": pack.layers.model_copy(update={"L0": "another task"})})
    assert not verify(edited, Path("/nonexistent")).pack_id_ok


def test_verify_uses_l2_when_l7_was_shed(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("a\n")
    pack = _pack({"a.py": "a\n"})
    only_l2 = pack.layers.model_copy(update={"L7": None})
    from ragstore.context.builder import assemble_pack

    report = verify(assemble_pack(only_l2, 10_000), tmp_path)
    assert report.ok and report.manifest_id_ok is None and report.checked == ("a.py",)


def test_repo_map_walk_skips_git_venvs_caches_and_binaries(tmp_path: Path) -> None:
    for name in ("src/a.py", ".git/config", ".venv/lib/x.py", "env2/pyvenv.cfg", "src/__pycache__/a.pyc"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\x00\x01")
    assert repo_map(tmp_path) == ["src/a.py"]


def test_read_file_entry_refuses_binary_and_non_utf8(tmp_path: Path) -> None:
    (tmp_path / "bin").write_bytes(b"a\x00b")
    (tmp_path / "latin").write_bytes(b"caf\xe9")
    for name in ("bin", "latin"):
        with pytest.raises(InvalidInput, match=name):
            read_file_entry(tmp_path / name, tmp_path)


def test_read_file_entry_keeps_crlf_bytes_so_the_manifest_matches_disk(tmp_path: Path) -> None:
    (tmp_path / "w.txt").write_bytes(b"a\r\nb\r\n")
    entry = read_file_entry(tmp_path / "w.txt", tmp_path)
    assert entry.content == "a\r\nb\r\n"
    assert verify(_pack({entry.path: entry.content}), tmp_path).ok
