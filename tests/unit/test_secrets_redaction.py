"""No piece of an API key, no URL password and no Authorization header reaches a message.

The provider here is the stub server echoing the request back (headers and body) in every error shape
a real one uses: a 401 JSON message, a JSON body quoting the headers, a 500 text page, a 429 that never
ends, a 200 that is not JSON. Keys are long and random-looking, hold regex characters, or a line break.
"""

from __future__ import annotations

import base64
import json
import logging
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragstore.embed.openai import OpenAIBackend
from ragstore.errors import BackendError, InvalidInput, RagstoreError, mask_secrets, redact
from tests.openai_stub import Reply, StubServer

KEYS = [
    "sk-Zq9vXw2LmT7pQ4rN8bK1yH6dF3gJ5cV0aE-uR+s/t=iO",  # 46 characters, as the providers' own
    "sk-(q+)*[Z]{2}\\d.^$|?Wv9#Xp%Lm&Tr~Qj`Nb_Kh!Yd;Fg",  # every regex metacharacter
]


def pieces(secret: str, size: int = 4) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def assert_no_piece(text: str, secret: str) -> None:
    low = text.lower()
    leaked = [p for p in pieces(secret) if p.lower() in low]
    assert not leaked, f"pieces of the secret in {text!r}: {leaked}"


def _headers_block(headers: dict[str, str]) -> str:
    return "\n".join(f"{k}: {v}" for k, v in headers.items())


# Each shape: (status, body built from the request headers and raw body).
Echo = Callable[[dict[str, str], bytes], bytes]
SHAPES: dict[str, tuple[int, Echo]] = {
    "401 message quoting the key": (
        401,
        lambda h, b: json.dumps(
            {"error": {"message": f"Incorrect API key provided: {h['authorization'][7:]}"}}
        ).encode(),
    ),
    "401 message quoting 33 characters": (
        401,
        lambda h, b: json.dumps({"error": {"message": f"bad key {h['authorization'][10:43]}..."}}).encode(),
    ),
    "401 detail holding the headers": (401, lambda h, b: json.dumps({"detail": h}).encode()),
    "400 JSON of the whole request": (
        400,
        lambda h, b: json.dumps({"error": {"message": {"headers": h, "body": b.decode()}}}).encode(),
    ),
    "403 text of the raw request": (403, lambda h, b: f"forbidden\r\n{_headers_block(h)}\r\n\r\n".encode() + b),
    "500 text page": (500, lambda h, b: f"<pre>Traceback\n  auth={h['authorization']!r}\n</pre>".encode()),
    "503 key upper-cased": (503, lambda h, b: f"unavailable for {h['authorization'].upper()}".encode()),
    "429 key percent-encoded": (
        429,
        lambda h, b: json.dumps({"error": {"message": urllib.parse.quote(h["authorization"])}}).encode(),
    ),
    "200 garbage": (200, lambda h, b: f"<html>{_headers_block(h)}</html>".encode()),
    "200 JSON without data": (200, lambda h, b: json.dumps({"echo": h}).encode()),
    "400 key split by spaces": (
        400,
        lambda h, b: " ".join(h["authorization"][i : i + 5] for i in range(0, len(h["authorization"]), 5)).encode(),
    ),
}


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(native_dim=8) as server:
        yield server


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_provider_echoing_the_request_never_gets_a_piece_of_the_key_into_the_error(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, key: str, shape: str
) -> None:
    monkeypatch.setenv("RS_KEY", key)
    caplog.set_level(logging.DEBUG)
    status, echo = SHAPES[shape]
    stub.queue(*[Reply(status=status, echo=echo)] * 3)
    backend = OpenAIBackend(stub.url, "stub-model", dim=8, api_key_env="RS_KEY", max_retries=2, sleep=lambda s: None)
    with pytest.raises(BackendError) as info:
        backend.embed(["x"])
    # The key did reach the provider, so the echo carried it.
    assert stub.requests[0].headers["authorization"] == f"Bearer {key}"
    message = str(info.value)
    assert_no_piece(message, key)
    assert "\n" not in message and "\r" not in message
    assert "authorization: bearer" not in message.lower()
    assert len(message) < 600
    assert_no_piece(caplog.text, key)
    assert_no_piece(repr(backend), key)


@pytest.mark.parametrize("key", ["sk-Qz7w\nXv9k-J4pM2", "sk-Zb8q\rWm3y-T6nR", "sk-Hq4z\x1b[2J-Vw7k", "sk-Pk2zé-Xq9w"])
def test_a_key_with_a_line_break_or_control_character_is_refused_without_printing_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, key: str
) -> None:
    monkeypatch.setenv("RS_KEY", key)
    with pytest.raises(InvalidInput, match=r"the API key in \$RS_KEY holds a line break") as info:
        OpenAIBackend("http://127.0.0.1:9/v1", "m", dim=8, api_key_env="RS_KEY")
    assert_no_piece(str(info.value), key.replace("\n", "").replace("\r", ""))
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    with pytest.raises(InvalidInput, match=r"the API key file .* holds a line break") as info:
        OpenAIBackend("http://127.0.0.1:9/v1", "m", dim=8, api_key_file=key_file)
    assert_no_piece(str(info.value), key.replace("\n", "").replace("\r", ""))


def test_a_transport_error_quoting_the_header_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    key = KEYS[0]
    monkeypatch.setenv("OPENAI_API_KEY", key)

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ProtocolError(f"illegal header value {request.headers['authorization'].encode()!r}")

    backend = OpenAIBackend(
        "http://provider.invalid/v1", "m", dim=8, max_retries=0, transport=httpx.MockTransport(handler)
    )
    with pytest.raises(BackendError) as info:
        backend.embed(["x"])
    assert "ProtocolError" in str(info.value)
    assert_no_piece(str(info.value), key)


def test_a_provider_body_excerpt_is_capped_and_one_line(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    stub.queue(Reply(status=400, raw=("line\n\x1b[31mred\x00" + "x" * 5000).encode()))
    with pytest.raises(BackendError) as info:
        OpenAIBackend(stub.url, "m", dim=8).embed(["x"])
    message = str(info.value)
    assert len(message) < 400 and "\n" not in message and "\x1b" not in message and "\x00" not in message
    assert "\\x1b[31mred" in message


# -- URL passwords --------------------------------------------------------------------------------------
def test_a_url_password_is_sent_only_as_basic_auth_and_never_shown(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    caplog.set_level(logging.DEBUG)
    password = "Pw9#zX@q/Lm7"
    url = stub.url.replace("http://", f"http://alice:{urllib.parse.quote(password, safe='')}@")
    backend = OpenAIBackend(url, "m", dim=8, max_retries=1, sleep=lambda s: None)
    backend.embed(["x"])
    sent = stub.requests[0].headers["authorization"]
    assert sent == "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()
    echo: Echo = lambda h, b: f"denied {h['authorization']} for alice:{password}".encode()  # noqa: E731
    stub.queue(Reply(status=500, echo=echo), Reply(status=500, echo=echo))
    with pytest.raises(BackendError) as info:
        backend.embed(["y"])
    for text in (str(info.value), repr(backend), caplog.text):
        assert_no_piece(text, password)
        assert sent[6:] not in text
    assert "alice" not in repr(backend) and stub.url in repr(backend)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("https://alice:s3cr3t-pw@host/v1", "s3cr3t-pw"),
        ("http://alice:p@ss/w0rd@127.0.0.1:8000/v1 refused", "p@ss/w0rd"),
        ("postgresql://u:s3cr3t@h/db", "s3cr3t"),
        ("connect to 'https://:t0ken-only@h/v1'", "t0ken-only"),
        ('{"base_url": "https://bob:hunter22@gw.example/v1"}', "hunter22"),
        ("user=u password='s3 cr3t' host=h", "s3 cr3t"),
        ("Authorization: Bearer abcdefgh12345", "abcdefgh12345"),
        ("{'authorization': 'Basic YWxpY2U6cGFzcw=='}", "YWxpY2U6cGFzcw=="),
        ("headers: x-api-key=k3y-v4lue-here", "k3y-v4lue-here"),
    ],
)
def test_mask_secrets_covers_url_dsn_and_header_forms(text: str, secret: str) -> None:
    masked = mask_secrets(text)
    assert secret not in masked and "***" in masked
    assert secret not in str(RagstoreError(text))


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=60),
    start=st.integers(min_value=0, max_value=60),
    size=st.integers(min_value=4, max_value=60),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_no_run_of_four_characters_of_a_secret_survives_redaction(
    key: str, start: int, size: int, before: str, after: str
) -> None:
    piece = key[start : start + size]
    if len(piece) < 4:
        return
    for spelled in (piece, json.dumps(piece)[1:-1], urllib.parse.quote(piece, safe=""), piece.upper()):
        out = redact(f"{before}{spelled}{after}", [key])
        assert spelled.lower() not in out.lower()
