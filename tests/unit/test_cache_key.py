"""The embedding cache's key names the provider: backend, model, dimension and the endpoint without
credentials, so two providers serving one model name never share vectors."""

from __future__ import annotations

import pytest

from ragstore.embed.cache import endpoint_identity, key_for


@pytest.mark.parametrize(
    ("url", "identity"),
    [
        ("https://API.Example.test/v1/", "https://api.example.test/v1"),
        ("https://user:s3cret@api.example.test/v1", "https://api.example.test/v1"),
        ("http://127.0.0.1:8000/v1?key=abc#frag", "http://127.0.0.1:8000/v1"),
        ("http://[::1]:11434/v1", "http://[::1]:11434/v1"),
        ("http://localhost:11434", "http://localhost:11434"),
    ],
)
def test_endpoint_identity_drops_credentials_query_and_case(url: str, identity: str) -> None:
    assert endpoint_identity(url) == identity


def test_keys_differ_by_endpoint_and_not_by_credentials() -> None:
    a = key_for("openai", "m", 8, "http://127.0.0.1:8001/v1")
    b = key_for("openai", "m", 8, "http://127.0.0.1:8002/v1")
    assert a != b and a.startswith("openai:m:8@")
    assert key_for("openai", "m", 8, "https://u:p@h.test/v1") == key_for("openai", "m", 8, "https://h.test/v1/")
    assert key_for("minilm", "all-MiniLM-L6-v2", 384) == "minilm:all-MiniLM-L6-v2:384"
