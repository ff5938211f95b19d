# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""`--rerank cross` and `--hyde` on `search`, `eval` and `context-pack`, against the local stub."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ragstore.cli.main import cli
from tests.openai_stub import Reply
from tests.toolkit.rerank_hyde_cli import KEY, TEXTS, store, stub  # noqa: F401  (fixtures)


def run(dsn, *args):
    return CliRunner().invoke(cli, ["--dsn", dsn, *args], catch_exceptions=False)


def test_search_cross_json_keeps_first_stage_score_and_rank(store, stub):
    result = run(store, "search", "docs", "copy files", "-k", "2", "--mode", "hnsw", "--json")
    plain = {h["chunk_id"]: (i + 1, h["score"]) for i, h in enumerate(json.loads(result.output)["hits"])}
    full = run(store, "search", "docs", "copy files", "-k", "4", "--mode", "hnsw", "--json")
    first = {h["chunk_id"]: (i + 1, h["score"]) for i, h in enumerate(json.loads(full.output)["hits"])}
    result = run(
        store, "search", "docs", "copy files", "-k", "2", "--mode", "hnsw", "--json",
        "--rerank", "cross", "--reranker-url", stub.url, "--reranker-model", "rr", "--rerank-depth", "4",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)["hits"]
    texts = sorted(TEXTS.values(), key=len)
    assert [h["text"] for h in hits] == texts[:2]
    for hit in hits:
        assert (hit["first_rank"], hit["score"]) == tuple(first[hit["chunk_id"]])
        assert hit["rerank_score"] == pytest.approx(100.0 - len(hit["text"]))
    assert stub.requests[-1].body["model"] == "rr" and len(stub.requests[-1].body["documents"]) == 4
    assert plain  # the plain search above ran without the reranker
    assert len(stub.requests) == 1


def test_search_cross_table_shows_both_scores(store, stub):
    result = run(store, "search", "docs", "copy files", "-k", "2", "--rerank", "cross", "--reranker-url", stub.url)
    assert result.exit_code == 0, result.output
    assert "first stage #" in result.output.splitlines()[0]


def test_option_mistakes_are_usage_errors(store, stub):
    no_url = run(store, "search", "docs", "copy files", "--rerank", "cross")
    assert no_url.exit_code == 2 and "--rerank cross needs --reranker-url" in no_url.output
    stray = run(store, "search", "docs", "copy files", "--reranker-url", stub.url)
    assert stray.exit_code == 2 and "--reranker-url is used only with --rerank cross" in stray.output
    hyde = run(store, "search", "docs", "copy files", "--hyde", "--hyde-url", stub.chat_url)
    assert hyde.exit_code == 2 and "--hyde-model" in hyde.output
    assert stub.requests == []


def test_reranker_key_is_never_printed(store, stub, monkeypatch):
    monkeypatch.setenv("RR_KEY", KEY)

    def echo(headers, raw):
        return json.dumps({"detail": f"key {headers['authorization']} rejected; request was {raw.decode()}"}).encode()

    stub.queue(Reply(status=401, echo=echo))
    result = run(
        store, "search", "docs", "copy files", "--rerank", "cross", "--reranker-url", stub.url,
        "--reranker-key-env", "RR_KEY",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "HTTP 401" in result.output and len(result.output.strip().splitlines()) == 1
    for i in range(len(KEY) - 3):
        assert KEY[i : i + 4] not in result.output
    assert stub.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_search_hyde_uses_the_answer_and_reports_it(store, stub):
    stub.answers["get rid of things"] = TEXTS["rm#0"]
    result = run(
        store, "search", "docs", "get rid of things", "-k", "1", "--mode", "hnsw", "--json",
        "--hyde", "--hyde-url", stub.chat_url, "--hyde-model", "chat", "--hyde-mode", "replace",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["hits"][0]["chunk_id"] == "rm#0"
    assert data["hyde"] == {"used": True, "cached": False, "answer": TEXTS["rm#0"], "note": None}


def test_search_hyde_refusal_falls_back_and_says_so(store, stub):
    stub.queue(Reply(edit=lambda d: {**d, "choices": [{"message": {"content": None, "refusal": "I cannot"}}]}))
    args = ["search", "docs", "copy files", "-k", "2", "--mode", "hybrid"]
    result = run(store, *args, "--hyde", "--hyde-url", stub.chat_url, "--hyde-model", "chat")
    assert result.exit_code == 0, result.output
    assert "note: HyDE fell back to the plain query" in result.output and "refused" in result.output
    plain = run(store, *args)
    assert result.output.splitlines()[-4:] == plain.output.splitlines()[-4:]


def test_eval_reports_the_rerankers_effect_per_mode(store, stub, tmp_path):
    out = tmp_path / "out.json"
    result = run(
        store, "eval", "docs", "--queries", str(tmp_path / "q.jsonl"), "--qrels", str(tmp_path / "qrels.tsv"),
        "--mode", "fts", "--mode", "hybrid", "-k", "2", "--json", str(out),
        "--rerank", "cross", "--reranker-url", stub.url,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    labels = [m["label"] for m in json.loads(out.read_text())["modes"]]
    assert labels == ["fts", "hybrid", "fts+cross", "hybrid+cross"]
    assert any(line.startswith("Δ fts+cross") for line in result.output.splitlines())
    assert len(stub.requests) == 6  # three queries, two reranked modes


def test_context_pack_retrieves_through_the_reranker(store, stub):
    result = run(
        store, "context-pack", "--brief", "b", "--budget", "4000", "--retrieve", "copy files", "--family", "docs",
        "-k", "2", "--mode", "hnsw", "--rerank", "cross", "--reranker-url", stub.url,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    pack = json.loads(result.output)
    snippets = pack["layers"]["L3"] if "L3" in pack["layers"] else pack["layers"]["snippets"]
    assert [s["text"] for s in snippets] == sorted(TEXTS.values(), key=len)[:2]
    assert "cross" in snippets[0]["reason"]


def test_eval_cross_on_a_weighted_hybrid_reads_the_rerank_depth(store, stub, tmp_path):
    out = tmp_path / "out.json"
    result = run(
        store, "eval", "docs", "--queries", str(tmp_path / "q.jsonl"), "--qrels", str(tmp_path / "qrels.tsv"),
        "--mode", "hnsw", "--weights", "fts=1,vector=2", "-k", "1", "--json", str(out),
        "--rerank", "cross", "--reranker-url", stub.url, "--rerank-depth", "3",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    labels = [m["label"] for m in json.loads(out.read_text())["modes"]]
    assert labels == ["hnsw", "hybrid[fts=1,vector=2]", "hnsw+cross", "hybrid[fts=1,vector=2]+cross"]
    assert [len(r.body["documents"]) for r in stub.requests] == [3] * 6
