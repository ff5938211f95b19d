"""The layered context pack (L0–L7): build, budget, shed, render and verify.

Pure functions except :mod:`ragstore.context.sources`, which reads the inputs from disk, and
:func:`verify`, which reads the files a pack's manifest names.
"""

from ragstore.context.budget import BudgetConfig, load_budget_config, select_token_budget
from ragstore.context.builder import (
    BuildError,
    BuildOk,
    BuildResult,
    FieldError,
    build_context_pack,
    pack_bytes,
)
from ragstore.context.canonical import canonical_json, estimate_tokens, sha256_hex
from ragstore.context.models import ContextPack, ContextPackInput, FileEntry, Layers, Snippet
from ragstore.context.render import render_markdown
from ragstore.context.retrieval import hits_to_snippets, retrieval_reason
from ragstore.context.shed import shed, shed_within_layers
from ragstore.context.verify import VerifyReport, verify

__all__ = [
    "BudgetConfig",
    "BuildError",
    "BuildOk",
    "BuildResult",
    "ContextPack",
    "ContextPackInput",
    "FieldError",
    "FileEntry",
    "Layers",
    "Snippet",
    "VerifyReport",
    "build_context_pack",
    "canonical_json",
    "estimate_tokens",
    "hits_to_snippets",
    "load_budget_config",
    "pack_bytes",
    "render_markdown",
    "retrieval_reason",
    "select_token_budget",
    "sha256_hex",
    "shed",
    "shed_within_layers",
    "verify",
]
