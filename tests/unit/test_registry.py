"""make_backend: names to backends, with clear errors for unknown names and contradictory settings."""

from __future__ import annotations

import numpy as np
import pytest

from ragstore.embed.base import Backend
from ragstore.embed.minilm import MiniLMBackend
from ragstore.embed.offline import OfflineBackend
from ragstore.embed.openai import OpenAIBackend
from ragstore.errors import InvalidInput
from ragstore.families import BACKENDS, make_backend


def test_backends_lists_every_name_default_first() -> None:
    assert BACKENDS == ("offline", "minilm", "openai", "external")


def test_external_backend_takes_its_dimension_from_dim_or_the_dimensions_option() -> None:
    from ragstore.embed.external import ExternalBackend

    backend = make_backend("external", model="mine", dimensions=12)
    assert isinstance(backend, ExternalBackend) and isinstance(backend, Backend)
    assert (backend.name, backend.model, backend.dim) == ("external", "mine", 12)
    assert make_backend("external", model="mine", dim=12, dimensions=12).dim == 12
    with pytest.raises(InvalidInput, match="12 dimensions and 8"):
        make_backend("external", model="mine", dim=8, dimensions=12)
    with pytest.raises(InvalidInput, match="embeds no text"):
        backend.embed(["hello"])


def test_offline_is_the_fingerprint_backend() -> None:
    backend = make_backend("offline")
    assert isinstance(backend, OfflineBackend) and isinstance(backend, Backend)
    assert (backend.name, backend.model, backend.dim) == ("offline", "fingerprint-v1", 16)
    assert backend.embed(["hello"]).shape == (1, 16)


def test_fixed_model_backends_accept_their_own_model_and_dim() -> None:
    assert make_backend("offline", model="fingerprint-v1", dim=16).dim == 16
    backend = make_backend("minilm", model="all-MiniLM-L6-v2", dim=384, threads=1)
    assert isinstance(backend, MiniLMBackend)
    assert (backend.name, backend.model, backend.dim) == ("minilm", "all-MiniLM-L6-v2", 384)


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("offline", {"model": "bge-small"}, "runs model 'fingerprint-v1', not 'bge-small'"),
        ("offline", {"dim": 384}, "16-dimension vectors, not 384"),
        ("minilm", {"dim": 768}, "384-dimension vectors, not 768"),
        ("offline", {"threads": 2}, "takes no option threads"),
        ("minilm", {"base_url": "http://x"}, "takes no option base_url"),
        ("openai", {"base_url": "http://127.0.0.1:1/v1"}, "needs a model"),
        ("openai", {"model": "m"}, "needs base_url"),
        ("openai", {"model": "m", "base_url": "http://127.0.0.1:1/v1", "colour": "red"}, "colour"),
    ],
)
def test_contradictory_or_missing_settings_are_invalid_input(
    name: str, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        make_backend(name, **kwargs)  # type: ignore[arg-type]


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(InvalidInput, match=r"unknown embedding backend 'bert'.*offline, minilm, openai"):
        make_backend("bert")


def test_openai_gets_model_dim_and_options() -> None:
    backend = make_backend("openai", "text-embedding-3-small", 1536, base_url="http://127.0.0.1:1/v1")
    assert isinstance(backend, OpenAIBackend)
    assert (backend.name, backend.model, backend.dim) == ("openai", "text-embedding-3-small", 1536)
    assert backend.embed([]).shape == (0, 1536)  # a known dim needs no request
    matryoshka = make_backend("openai", "m", base_url="http://127.0.0.1:1/v1", dimensions=256)
    assert matryoshka.dim == 256
    assert np.empty((0, 256)).shape == matryoshka.embed([]).shape
