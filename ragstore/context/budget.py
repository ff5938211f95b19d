"""The token budget: model-specific > role-specific > default, from a small TOML or JSON file.

A budgets file looks like this (TOML; the JSON form has the same keys)::

    default = 8000

    [models]
    "gpt-4o-mini" = 64000

    [roles]
    reviewer = 16000
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragstore.common.files import read_bytes
from ragstore.common.strictjson import loads_strict
from ragstore.errors import InvalidInput

__all__ = ["DEFAULT_MAX_TOKENS", "BudgetConfig", "load_budget_config", "select_token_budget"]

DEFAULT_MAX_TOKENS = 8000
Tokens = Annotated[int, Field(strict=True, ge=1)]


class BudgetConfig(BaseModel):
    """Token budgets by model and by role, and the default when neither matches."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Tokens = DEFAULT_MAX_TOKENS
    models: dict[str, Tokens] = {}
    roles: dict[str, Tokens] = {}


def select_token_budget(model: str | None, role: str | None, config: BudgetConfig) -> int:
    """The budget for this call: ``config.models[model]``, else ``config.roles[role]``, else the default."""
    if model is not None and model in config.models:
        return config.models[model]
    if role is not None and role in config.roles:
        return config.roles[role]
    return config.default


def load_budget_config(path: str | Path) -> BudgetConfig:
    """Read a budgets file: TOML unless the name ends in ``.json``.

    Raises NotFound when the file is missing, InvalidInput (naming the file and field) when it does not parse
    or validate.
    """
    source = Path(path)
    raw = read_bytes(source, "budgets file")
    try:
        if source.suffix.lower() == ".json":
            data = loads_strict(raw, str(source))
        else:
            data = tomllib.loads(raw.decode("utf-8"))
    except InvalidInput:
        raise
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidInput(f"{source}: cannot parse budgets: {exc}") from exc
    try:
        return BudgetConfig.model_validate(data)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}" for err in exc.errors())
        raise InvalidInput(f"{source}: invalid budgets: {details}") from exc
