# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""The HTTP stages (reranker, HyDE) as the CLI runs them: the key never printed, a deadline per attempt,
timeouts checked, one `note:` line per HyDE fallback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.search.hyde import Hyde
from tests.openai_stub import Reply
from tests.toolkit.rerank_hyde_cli import KEY, store, stub  # noqa: F401  (fixtures)

SEARCH = ("search", "docs", "copy files", "-k", "2", "--mode", "hnsw")


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--dsn", dsn, *args], catch_exceptions=False)


def _quoting(headers: dict[str, str], raw: bytes) -> bytes:
    """A chat answer that quotes the request's Authorization header back, in a few spellings."""
    auth = headers["authorization"]
    content = f"the secret is {auth.removeprefix('Bearer ')} ok; header {auth}; json {json.dumps(auth)}"
    message = {"role": "assistant", "content": content, "refusal": None}
    return json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}).encode()


def _no_piece_of_key(text: str) -> None:
    for i in range(len(KEY) - 3):
        assert KEY[i : i + 4] not in text, text


def test_hyde_never_prints_the_key_the_chat_model_quotes_back(store: str, stub: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("CHAT_KEY", KEY)
    stub.queue(Reply(echo=_quoting))
    hyde = ["--hyde", "--hyde-url", stub.chat_url, "--hyde-model", "chat", "--hyde-key-env", "CHAT_KEY"]
    result = run(store, *SEARCH, "--json", *hyde)
    assert result.exit_code == 0, result.output
    assert stub.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    answer = json.loads(result.output)["hyde"]["answer"]
    assert answer.startswith("the secret is *** ok")
    _no_piece_of_key(result.output)


def test_the_library_hydes_last_answer_holds_no_piece_of_the_key(stub: Any, monkeypatch: Any) -> None:
    import numpy as np

    monkeypatch.setenv("CHAT_KEY", KEY)
    stub.queue(Reply(echo=_quoting))
    backend = OfflineBackend()
    hyde = Hyde(stub.chat_url, "chat", api_key_env="CHAT_KEY")
    query = np.asarray(backend.embed(["copy files"])[0], dtype=np.float32)
    hyde.vector(None, backend, "copy files", query)
    assert hyde.last is not None and hyde.last.used and hyde.last.answer
    assert "***" in hyde.last.answer
    _no_piece_of_key(hyde.last.answer)
    hyde.close()


@pytest.mark.slow
def test_a_reranker_sending_a_byte_at_a_time_is_cut_off_at_the_timeout(store: str, stub: Any) -> None:
    body = json.dumps({"results": [{"index": 0, "relevance_score": 1.0}], "pad": " " * 400}).encode()
    stub.queue(*[Reply(raw=body, trickle=0.05) for _ in range(4)])  # about 25 s each; every attempt
    result = run(
        store, *SEARCH, "--rerank", "cross", "--reranker-url", stub.url, "--reranker-timeout", "0.5"
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "no whole answer within the 0.5 s timeout" in lines[0], result.output
    assert len(stub.requests) == 4  # the first attempt and its three retries, each cut off


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "0", "-1", "1e9"])
@pytest.mark.parametrize("flag", ["--reranker-timeout", "--hyde-timeout"])
def test_a_timeout_that_is_not_a_finite_positive_number_is_one_line(
    store: str, stub: Any, flag: str, value: str
) -> None:
    stage = (
        ["--rerank", "cross", "--reranker-url", stub.url]
        if flag == "--reranker-timeout"
        else ["--hyde", "--hyde-url", stub.chat_url, "--hyde-model", "chat"]
    )
    result = CliRunner().invoke(cli, ["--dsn", store, *SEARCH, *stage, flag, value])
    assert result.exit_code in (1, 2), result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert "timeout" in result.output
    assert stub.requests == []


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), 0, -1, 1e9, True])
def test_the_library_refuses_such_timeouts_too(timeout: Any) -> None:
    with pytest.raises(InvalidInput, match="timeout must be a number of seconds above 0 and at most 3600"):
        Hyde("http://127.0.0.1:9/v1", "chat", timeout=timeout)


def _message(content: Any, **extra: Any) -> Reply:
    message = {"role": "assistant", "content": content, **extra}
    return Reply(json_body={"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})


FALLBACKS = {
    "empty": [_message("")],
    "whitespace": [_message("  \n ")],
    "null": [_message(None)],
    "list": [_message(["a", "b"])],
    "refusal": [_message(None, refusal="I cannot help")],
    "filtered": [
        Reply(json_body={"choices": [{"index": 0, "message": {"content": "x"}, "finish_reason": "content_filter"}]})
    ],
    "500": [Reply(status=500, json_body={"error": {"message": "boom"}}) for _ in range(3)],
    "no-choices": [Reply(json_body={"id": "x"})],
    "non-JSON": [Reply(raw=b"<html>not json</html>")],
}


@pytest.mark.slow
@pytest.mark.parametrize("cause", list(FALLBACKS))
def test_a_hyde_fallback_prints_exactly_its_note_line(store: str, stub: Any, tmp_path: Path, cause: str) -> None:
    stub.queue(*FALLBACKS[cause])
    env = {**os.environ, "RAGSTORE_HOME": str(tmp_path / "home")}
    args = ["--dsn", store, *SEARCH, "--hyde", "--hyde-url", stub.chat_url, "--hyde-model", "chat"]
    done = subprocess.run(
        [sys.executable, "-m", "ragstore.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    # The offline family's own note (fingerprint vectors) is documented apart; nothing else may print.
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("note: family docs uses offline")]
    assert len(lines) == 1 and lines[0].startswith("note: HyDE fell back to the plain query"), done.stderr
