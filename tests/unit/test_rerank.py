"""The HTTP reranker and cross_rerank against a local stub: shapes, validation, timeouts, retries, secrets."""

from __future__ import annotations

import json
import math

import pytest

from ragstore.errors import BackendError, InvalidInput
from ragstore.search.request import Hit
from ragstore.search.rerank import HttpReranker, Reranker, check_results, cross_rerank
from tests.openai_stub import Reply
from tests.rerank_stub import RerankStub

KEY = "sk-Zq81fXw93LmPq0aaT7vB"
DOCS = ["the cat sat", "dogs bark loudly", "a cat and a dog", "nothing here"]


@pytest.fixture
def stub():
    with RerankStub() as server:
        yield server


def make(stub, **kw):
    kw.setdefault("sleep", lambda s: None)
    return HttpReranker(kw.pop("url", stub.rerank_url), kw.pop("model", "rr-model"), **kw)


def test_orders_by_relevance_and_sends_the_cohere_shape(stub):
    pairs = make(stub).rerank("cat dog", DOCS)
    assert [i for i, _ in pairs] == [2, 0, 3, 1]
    assert pairs[0][1] > pairs[1][1] > pairs[3][1]
    sent = stub.requests[-1]
    assert sent.path == "/rerank"
    assert sent.body == {"model": "rr-model", "query": "cat dog", "documents": DOCS}


def test_base_url_gets_rerank_appended(stub):
    make(stub, url=stub.url).rerank("cat", DOCS)
    assert stub.requests[-1].path == "/rerank"


def test_tei_shape_both_ways():
    with RerankStub(tei=True) as stub:
        pairs = make(stub, api="tei", model=None).rerank("cat dog", DOCS)
        assert [i for i, _ in pairs] == [2, 0, 3, 1]
        assert stub.requests[-1].body == {"query": "cat dog", "texts": DOCS, "truncate": True}
        # a TEI-shaped answer to a Cohere-shaped request is accepted too
        assert [i for i, _ in make(stub).rerank("cat dog", DOCS)] == [2, 0, 3, 1]


def test_top_n_is_sent_and_a_shorter_answer_accepted(stub):
    pairs = make(stub).rerank("cat dog", DOCS, top_n=2)
    assert [i for i, _ in pairs] == [2, 0]
    assert stub.requests[-1].body["top_n"] == 2


def test_no_documents_no_request(stub):
    assert make(stub).rerank("cat", []) == []
    assert stub.requests == []


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(raw=b"<html>oops</html>"), "not JSON"),
        (Reply(json_body={"data": []}), "neither a 'results' list"),
        (Reply(json_body={"results": [{"index": 0, "relevance_score": 1.0}]}), "returned 1 results for 4 documents"),
        (
            Reply(json_body={"results": [{"index": i, "relevance_score": 1.0} for i in (0, 1, 2, 7)]}),
            "index 7, not an integer in 0..3",
        ),
        (
            Reply(json_body={"results": [{"index": i, "relevance_score": 1.0} for i in (0, 1, 1, 2)]}),
            "index 1 appears twice",
        ),
        (
            Reply(json_body={"results": [{"index": i, "relevance_score": "high"} for i in range(4)]}),
            "not a finite number",
        ),
        (Reply(raw=b'{"results": [{"index": 0, "relevance_score": NaN}]}'), "returned 1 results"),
        (
            Reply(json_body={"results": [{"index": True, "relevance_score": 1} for _ in range(4)]}),
            "not an integer",
        ),
        (Reply(json_body={"results": [[0, 1.0], "x", [2, 1.0], [3, 1.0]]}), "result 1 is not an object"),
    ],
)
def test_garbage_answers_are_clear_errors(stub, reply, message):
    stub.queue(reply)
    with pytest.raises(BackendError, match=message):
        make(stub).rerank("cat", DOCS)


def test_nan_score_is_refused():
    with pytest.raises(BackendError, match="not a finite number"):
        check_results([{"index": 0, "relevance_score": math.nan}], 1, 1)


def test_timeouts_are_retried_then_named(stub):
    stub.queue(Reply(delay=0.6), Reply(delay=0.6))
    reranker = make(stub, timeout=0.2, max_retries=1)
    with pytest.raises(BackendError, match=r"still failing after 2 attempts \(Timeout: no whole answer"):
        reranker.rerank("cat", DOCS)
    assert len(stub.requests) == 2


def test_429_and_5xx_are_retried_with_retry_after(stub):
    sleeps: list[float] = []
    stub.queue(Reply(status=429, headers={"Retry-After": "7"}), Reply(status=503))
    pairs = make(stub, sleep=sleeps.append, backoff=0.5).rerank("cat dog", DOCS)
    assert [i for i, _ in pairs] == [2, 0, 3, 1]
    assert len(stub.requests) == 3
    assert 7.0 <= sleeps[0] <= 7.7 and 1.0 <= sleeps[1] <= 1.1  # Retry-After, then backoff * 2


def test_a_4xx_is_not_retried(stub):
    stub.queue(Reply(status=400, json_body={"message": "documents too long"}))
    with pytest.raises(BackendError, match=r"refused the request .*documents too long"):
        make(stub).rerank("cat", DOCS)
    assert len(stub.requests) == 1


def test_key_is_sent_as_bearer_and_never_shown(stub, monkeypatch):
    monkeypatch.setenv("RR_KEY", KEY)

    def echo(headers, raw):  # a provider quoting the request, headers and all, in its error
        return json.dumps({"error": {"message": f"bad key {headers['authorization']} in {raw.decode()}"}}).encode()

    stub.queue(Reply(status=401, echo=echo))
    reranker = make(stub, api_key_env="RR_KEY")
    with pytest.raises(BackendError) as info:
        reranker.rerank("cat", DOCS)
    assert stub.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    text = str(info.value) + repr(reranker)
    assert "HTTP 401" in text
    for i in range(len(KEY) - 3):
        assert KEY[i : i + 4] not in text


def test_key_echoed_in_a_500_body_after_retries_is_not_shown(stub, monkeypatch):
    monkeypatch.setenv("RR_KEY", KEY)
    stub.queue(*[Reply(status=500, raw=f"internal: token={KEY[::1]} upper={KEY.upper()}".encode())] * 2)
    with pytest.raises(BackendError) as info:
        make(stub, api_key_env="RR_KEY", max_retries=1).rerank("cat", DOCS)
    assert "still failing after 2 attempts" in str(info.value)
    assert KEY[3:11] not in str(info.value) and KEY.upper()[3:11] not in str(info.value)


def test_key_file_and_url_password(stub, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    reranker = make(stub, api_key_file=key_file)
    reranker.rerank("cat", DOCS)
    assert stub.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(reranker)
    url = stub.rerank_url.replace("http://", "http://user:s3cretpw@")
    stub.queue(Reply(status=403, echo=lambda headers, raw: headers["authorization"].encode()))
    reranker = make(stub, url=url)
    with pytest.raises(BackendError) as info:
        reranker.rerank("cat", DOCS)
    assert stub.requests[-1].headers["authorization"].startswith("Basic ")
    shown = str(info.value) + repr(reranker)
    assert "s3cretpw" not in shown and stub.requests[-1].headers["authorization"][6:] not in shown


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": ""}, "URL is required"),
        ({"url": "ftp://x/rerank"}, "must start with http"),
        ({"api": "grpc"}, "unknown reranker API"),
        ({"timeout": 0}, "timeout must be a number of seconds above 0"),
        ({"model": " "}, "model name is empty"),
    ],
)
def test_bad_configuration_is_invalid_input(stub, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        make(stub, **kwargs)


def _hits(n):
    return [Hit(chunk_id=f"c{i}", package_path="p", score=1.0 - i / 10, text=f"text {i}") for i in range(n)]


class Fixed:
    def __init__(self, pairs):
        self.pairs = pairs
        self.seen: list[str] = []

    def rerank(self, query, documents):
        self.seen = list(documents)
        return self.pairs


def test_cross_rerank_keeps_first_stage_score_and_rank():
    fixed = Fixed([(2, 9.0), (0, 5.0), (1, 1.0)])
    assert isinstance(fixed, Reranker)
    out = cross_rerank(_hits(3), "q", fixed, k=2)
    assert [h.chunk_id for h in out] == ["c2", "c0"]
    assert [h.first_rank for h in out] == [3, 1]
    assert [h.rerank_score for h in out] == [9.0, 5.0]
    assert [h.score for h in out] == pytest.approx([0.8, 1.0])
    assert fixed.seen == ["text 0", "text 1", "text 2"]


def test_cross_rerank_accepts_a_reranker_that_scores_only_its_top_k():
    out = cross_rerank(_hits(4), "q", Fixed([(3, 2.0), (1, 1.0)]), k=2)
    assert [h.chunk_id for h in out] == ["c3", "c1"]
    assert [h.rerank_score for h in out] == [2.0, 1.0]


def test_cross_rerank_refuses_a_reranker_that_answers_too_little_or_wrong():
    with pytest.raises(BackendError, match="returned 1 results for 3 documents"):
        cross_rerank(_hits(5), "q", Fixed([(0, 1.0)]), k=3)
    with pytest.raises(BackendError, match="index 9"):
        cross_rerank(_hits(3), "q", Fixed([(9, 1.0), (0, 1.0), (1, 1.0)]), k=3)
