"""OpenAIBackend against a real HTTP stub on 127.0.0.1: batching, retries, validation, key hygiene."""

from __future__ import annotations

import email.utils
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from ragstore.embed.base import Backend
from ragstore.embed.openai import PROBE_TEXT, OpenAIBackend, _retry_after
from ragstore.errors import BackendError, InvalidInput
from tests.openai_stub import Reply, StubServer, vector_for

KEY = "sk-test-SECRET-0123456789"


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(native_dim=8) as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make(stub: StubServer, sleeps: list[float], monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    def build(**kwargs: Any) -> OpenAIBackend:
        kwargs.setdefault("base_url", stub.url)
        kwargs.setdefault("model", "text-embedding-test")
        kwargs.setdefault("backoff", 0.5)
        return OpenAIBackend(sleep=sleeps.append, **kwargs)

    return build


def expected(texts: list[str], dim: int = 8) -> np.ndarray:
    return np.array([vector_for(t, dim) for t in texts], dtype=np.float32)


def test_embeds_in_input_order_as_contiguous_float32(make: Any, stub: StubServer) -> None:
    backend = make(dim=8)
    texts = ["alpha", "beta", "gamma"]
    out = backend.embed(texts)
    assert out.dtype == np.float32 and out.shape == (3, 8) and out.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(out, expected(texts), atol=1e-7)
    sent = stub.requests[0]
    assert sent.path == "/v1/embeddings"
    assert sent.body == {"model": "text-embedding-test", "input": texts}
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert isinstance(backend, Backend) and backend.name == "openai" and backend.model == "text-embedding-test"


def test_reorders_rows_by_data_index(make: Any, stub: StubServer) -> None:
    stub.reverse_order = True
    texts = ["one", "two", "three", "four"]
    np.testing.assert_allclose(make(dim=8).embed(texts), expected(texts), atol=1e-7)


def test_splits_into_batches_of_batch_size(make: Any, stub: StubServer) -> None:
    texts = [f"text {i}" for i in range(5)]
    out = make(dim=8, batch_size=2).embed(texts)
    assert [r.body["input"] for r in stub.requests] == [texts[0:2], texts[2:4], texts[4:5]]
    np.testing.assert_allclose(out, expected(texts), atol=1e-7)


def test_429_waits_for_retry_after_then_succeeds(make: Any, stub: StubServer, sleeps: list[float]) -> None:
    stub.queue(Reply(status=429, json_body={"error": {"message": "slow down"}}, headers={"Retry-After": "3"}))
    out = make(dim=8).embed(["x"])
    np.testing.assert_allclose(out, expected(["x"]), atol=1e-7)
    assert len(stub.requests) == 2
    assert len(sleeps) == 1 and 3.0 <= sleeps[0] <= 3.3


def test_5xx_backs_off_exponentially_with_small_jitter(make: Any, stub: StubServer, sleeps: list[float]) -> None:
    stub.queue(Reply(status=500, raw=b"oops"), Reply(status=503, raw=b"busy"), Reply(status=502, raw=b""))
    make(dim=8, backoff=0.5).embed(["x"])
    assert len(stub.requests) == 4
    for got, base in zip(sleeps, [0.5, 1.0, 2.0], strict=True):
        assert base <= got <= base * 1.1


def test_gives_up_after_max_retries_naming_the_last_failure(make: Any, stub: StubServer, sleeps: list[float]) -> None:
    stub.queue(*[Reply(status=500, json_body={"error": {"message": "model crashed"}})] * 5)
    with pytest.raises(BackendError, match=r"3 attempts.*HTTP 500.*model crashed"):
        make(dim=8, max_retries=2).embed(["x"])
    assert len(stub.requests) == 3 and len(sleeps) == 2


def test_400_is_not_retried_and_quotes_the_provider(make: Any, stub: StubServer, sleeps: list[float]) -> None:
    body = {"error": {"message": "This model's maximum context length is 8192 tokens", "type": "invalid"}}
    stub.queue(Reply(status=400, json_body=body))
    with pytest.raises(BackendError, match="maximum context length is 8192 tokens"):
        make(dim=8).embed(["x"])
    assert len(stub.requests) == 1 and sleeps == []


def test_api_key_never_appears_in_errors_or_repr(make: Any, stub: StubServer) -> None:
    stub.queue(Reply(status=401, json_body={"error": {"message": f"Incorrect API key provided: {KEY}."}}))
    backend = make(dim=8)
    with pytest.raises(BackendError) as info:
        backend.embed(["x"])
    assert KEY not in str(info.value) and "Incorrect API key provided: ***" in str(info.value)
    assert KEY not in repr(backend) and "api_key='***'" in repr(backend)


def test_key_is_read_from_a_file(make: Any, stub: StubServer, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\n")
    make(dim=8, api_key_file=key_file).embed(["x"])
    assert stub.requests[0].headers["authorization"] == "Bearer sk-from-file"


def test_missing_key_file_is_invalid_input(make: Any, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="API key file"):
        make(api_key_file=tmp_path / "absent")


def test_no_key_sends_no_authorization(make: Any, stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    backend = make(dim=8)
    backend.embed(["x"])
    assert "authorization" not in stub.requests[0].headers and "api_key=None" in repr(backend)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(raw=b"<html>gateway</html>"), "not JSON"),
        (Reply(json_body={"object": "list"}), "'data' list"),
        (Reply(dim=5), "5-dimension embeddings, expected 8"),
        (Reply(edit=lambda d: {**d, "data": d["data"][:1]}), "1 embeddings for 2 texts"),
        (Reply(edit=lambda d: _set(d, 1, "index", 0)), "index 0 appears twice"),
        (Reply(edit=lambda d: _set(d, 1, "index", None)), r"data\[1\].index is None"),
        (Reply(edit=lambda d: _set(d, 0, "embedding", [float("nan")] * 8)), "NaN or infinity"),
        (Reply(edit=lambda d: _set(d, 0, "embedding", [0.0] * 8)), "all zeros"),
        (Reply(edit=lambda d: _set(d, 0, "embedding", [0.1] * 7)), "different lengths"),
        (Reply(edit=lambda d: _set(d, 0, "embedding", ["a"] * 8)), "not a number"),
        (Reply(edit=lambda d: _set(d, 0, "embedding", "AAAA")), "not a list of numbers"),
    ],
)
def test_malformed_answers_are_refused(make: Any, stub: StubServer, reply: Reply, message: str) -> None:
    stub.queue(reply)
    with pytest.raises(BackendError, match=message):
        make(dim=8).embed(["first", "second"])


def _set(doc: dict[str, Any], row: int, key: str, value: Any) -> dict[str, Any]:
    doc["data"][row][key] = value
    return doc


def test_slow_answer_times_out_and_is_retried(make: Any, stub: StubServer, sleeps: list[float]) -> None:
    stub.queue(Reply(delay=1.0))
    out = make(dim=8, timeout=0.2, max_retries=1).embed(["x"])
    np.testing.assert_allclose(out, expected(["x"]), atol=1e-7)
    # The answer came from the second request: the first, slower than the timeout, was abandoned and retried
    # (no wall-clock bound: a loaded machine makes any such bound flaky).
    assert len(sleeps) == 1 and len(stub.requests) == 2


def test_timeout_without_retries_is_a_backend_error(make: Any, stub: StubServer) -> None:
    stub.queue(Reply(delay=1.0))
    with pytest.raises(BackendError, match="Timeout"):
        make(dim=8, timeout=0.2, max_retries=0).embed(["x"])


def test_connection_refused_is_retried_then_reported(sleeps: list[float]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = OpenAIBackend(f"http://127.0.0.1:{port}/v1", "m", dim=8, max_retries=2, sleep=sleeps.append)
    with pytest.raises(BackendError, match="ConnectError"):
        backend.embed(["x"])
    assert len(sleeps) == 2


def test_dimensions_is_sent_and_longer_vectors_are_cut_and_renormalised(make: Any, stub: StubServer) -> None:
    stub.honour_dimensions = False  # the provider ignores the parameter and sends its 8 dimensions
    backend = make(dimensions=4)
    out = backend.embed(["x", "y"])
    assert stub.requests[0].body["dimensions"] == 4 and backend.dim == 4 and out.shape == (2, 4)
    full = expected(["x", "y"])[:, :4]
    np.testing.assert_allclose(out, full / np.linalg.norm(full, axis=1, keepdims=True), atol=1e-6)


def test_dimensions_shorter_than_asked_is_refused(make: Any, stub: StubServer) -> None:
    stub.queue(Reply(dim=3))
    with pytest.raises(BackendError, match="3-dimension embeddings, expected 4"):
        make(dimensions=4).embed(["x"])


def test_unknown_dim_is_probed_once(make: Any, stub: StubServer) -> None:
    backend = make()
    assert backend.dim == 8 and backend.dim == 8
    assert [r.body["input"] for r in stub.requests] == [[PROBE_TEXT]]


def test_dim_learnt_from_the_first_answer_is_then_enforced(make: Any, stub: StubServer) -> None:
    backend = make()
    backend.embed(["x"])
    stub.queue(Reply(dim=6))
    with pytest.raises(BackendError, match="6-dimension embeddings, expected 8"):
        backend.embed(["y"])
    assert len(stub.requests) == 2


def test_empty_text_is_refused_before_any_request(make: Any, stub: StubServer) -> None:
    with pytest.raises(InvalidInput, match="#1 is empty"):
        make(dim=8).embed(["ok", ""])
    with pytest.raises(InvalidInput):
        make(dim=8).embed("a single string")
    assert stub.requests == []


def test_no_texts_gives_an_empty_matrix_without_a_request(make: Any, stub: StubServer) -> None:
    assert make(dim=8).embed([]).shape == (0, 8) and stub.requests == []


@pytest.mark.parametrize(
    "kwargs",
    [{"dim": 0}, {"dim": 4, "dimensions": 8}, {"batch_size": 0}, {"base_url": ""}, {"timeout": 0}],
)
def test_bad_settings_are_invalid_input(make: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        make(**kwargs)


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert _retry_after("2.5") == 2.5
    assert _retry_after(None) is None and _retry_after("soon") is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (_retry_after(future) or 0) <= 31
    assert _retry_after("-4") == 0.0


def test_a_custom_transport_can_stand_in_for_the_network() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [0.6, 0.8]}]})

    backend = OpenAIBackend("http://provider.invalid/v1", "m", transport=httpx.MockTransport(handler))
    np.testing.assert_allclose(backend.embed(["x"]), [[0.6, 0.8]], atol=1e-7)
