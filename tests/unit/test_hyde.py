"""HyDE against a local chat stub: the request, the combination, and every way of falling back."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragstore.embed.offline import OfflineBackend
from ragstore.errors import BackendError, InvalidInput
from ragstore.search.hyde import Hyde, combine
from tests.openai_stub import Reply
from tests.rerank_stub import RerankStub

KEY = "sk-Hq7yZw4Rt9LmXc2bVn5"


@pytest.fixture
def stub():
    with RerankStub() as server:
        yield server


def make(stub, **kw):
    kw.setdefault("sleep", lambda s: None)
    kw.setdefault("api_key_env", None)
    return Hyde(kw.pop("url", stub.chat_url), kw.pop("model", "chat-model"), **kw)


def unit(v):
    return v / np.linalg.norm(v)


def test_generate_sends_a_chat_completion_and_returns_the_content(stub):
    stub.answers["how do I copy files"] = "  Use cp SOURCE DEST to copy files.  "
    assert make(stub).generate("how do I copy files") == "Use cp SOURCE DEST to copy files."
    sent = stub.requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "chat-model"
    assert sent.body["messages"][-1] == {"role": "user", "content": "how do I copy files"}
    assert sent.body["messages"][0]["role"] == "system"


def test_average_and_replace_combine_the_vectors(stub):
    backend = OfflineBackend()
    q = backend.embed(["copy files"])[0]
    answer = "Use cp SOURCE DEST to copy files."
    stub.answers["copy files"] = answer
    h = backend.embed([answer])[0]
    averaged = make(stub).vector(None, backend, "copy files", q)
    assert np.allclose(averaged, unit(unit(q) + unit(h)), atol=1e-6)
    replaced = make(stub, mode="replace").vector(None, backend, "copy files", q)
    assert np.allclose(replaced, h, atol=1e-6)
    hyde = make(stub)
    hyde.vector(None, backend, "copy files", q)
    assert hyde.last is not None and hyde.last.used and hyde.last.answer == answer and hyde.last.note is None


def test_combine_ignores_a_zero_vector():
    h = np.array([3.0, 4.0], dtype=np.float32)
    assert np.allclose(combine(np.zeros(2, dtype=np.float32), h, "average"), [0.6, 0.8])
    with pytest.raises(InvalidInput, match="unknown HyDE mode"):
        combine(h, h, "sum")


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (
            Reply(
                edit=lambda d: {
                    **d,
                    "choices": [
                        {**d["choices"][0], "message": {"content": None, "refusal": "I can't help with that."}}
                    ],
                }
            ),
            'refused to answer: "I can\'t help with that."',
        ),
        (
            Reply(edit=lambda d: {**d, "choices": [{**d["choices"][0], "finish_reason": "content_filter"}]}),
            "refused to answer (finish_reason content_filter)",
        ),
        (Reply(edit=lambda d: {**d, "choices": [{**d["choices"][0], "message": {"content": "   "}}]}), "empty content"),
        (Reply(json_body={"choices": []}), "without a 'choices' list"),
        (Reply(raw=b"not json"), "not JSON"),
        (Reply(status=404, json_body={"error": {"message": "model not found"}}), "model not found"),
    ],
)
def test_a_refused_empty_or_broken_answer_falls_back_to_the_plain_query(stub, reply, why, caplog):
    backend = OfflineBackend()
    q = backend.embed(["copy files"])[0]
    stub.queue(reply)
    hyde = make(stub)
    out = hyde.vector(None, backend, "copy files", q)
    assert np.array_equal(out, q)
    assert hyde.last is not None and not hyde.last.used
    assert hyde.last.note is not None and hyde.last.note.startswith("HyDE fell back to the plain query")
    assert why in hyde.last.note
    assert "HyDE fell back" in caplog.text
    with pytest.raises(BackendError):
        stub.queue(reply)
        make(stub).generate("copy files")


def test_a_timeout_is_retried_then_falls_back(stub):
    backend = OfflineBackend()
    q = backend.embed(["copy files"])[0]
    stub.queue(Reply(delay=0.6), Reply(delay=0.6))
    hyde = make(stub, timeout=0.2, max_retries=1)
    assert np.array_equal(hyde.vector(None, backend, "copy files", q), q)
    assert hyde.last is not None and "still failing after 2 attempts (Timeout: no whole" in (hyde.last.note or "")
    assert len(stub.requests) == 2


def test_a_429_then_an_answer_is_used(stub):
    stub.queue(Reply(status=429, headers={"Retry-After": "1"}))
    sleeps: list[float] = []
    assert make(stub, sleep=sleeps.append).generate("q") == "hypothetical answer to: q"
    assert len(sleeps) == 1 and 1.0 <= sleeps[0] <= 1.1


def test_key_is_sent_and_never_in_the_fallback_note(stub, monkeypatch):
    monkeypatch.setenv("CHAT_KEY", KEY)

    def echo(headers, raw):
        return json.dumps({"error": {"message": f"invalid key {headers['authorization']} for {raw.decode()}"}}).encode()

    stub.queue(Reply(status=401, echo=echo))
    hyde = make(stub, api_key_env="CHAT_KEY")
    backend = OfflineBackend()
    hyde.vector(None, backend, "copy files", backend.embed(["copy files"])[0])
    assert stub.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    shown = (hyde.last.note if hyde.last else "") + repr(hyde)
    assert "HTTP 401" in shown
    for i in range(len(KEY) - 3):
        assert KEY[i : i + 4] not in shown


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": ""}, "--hyde-url"),
        ({"model": ""}, "--hyde-model"),
        ({"mode": "sum"}, "unknown HyDE mode"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_bad_configuration_is_invalid_input(stub, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        make(stub, **kwargs)


def test_url_gets_chat_completions_once(stub):
    assert make(stub).url.endswith("/v1/chat/completions")
    assert make(stub, url=stub.chat_url + "/chat/completions/").url.endswith("/v1/chat/completions")


def test_last_is_each_callers_own_report_when_searches_run_concurrently(stub):
    # One Hyde shared by two threads: A's query falls back (empty answer), B's succeeds, and B finishes
    # between A's call and A reading its report. A must still read its own report, not B's.
    import threading

    backend = OfflineBackend()
    stub.answers["bad question"] = ""
    hyde = make(stub)
    a_called, b_done = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def a() -> None:
        hyde.vector(None, backend, "bad question", backend.embed(["bad question"])[0])
        a_called.set()
        b_done.wait(10)
        seen["a"] = hyde.last

    def b() -> None:
        a_called.wait(10)
        hyde.vector(None, backend, "good question", backend.embed(["good question"])[0])
        seen["b"] = hyde.last
        b_done.set()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen["a"] is not None and seen["a"].used is False and "empty content" in (seen["a"].note or "")
    assert seen["b"] is not None and seen["b"].used is True
    vector, report = hyde.vector_with_report(None, backend, "bad question", backend.embed(["bad question"])[0])
    assert report.used is False and np.allclose(vector, backend.embed(["bad question"])[0])
