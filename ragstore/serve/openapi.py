"""The OpenAPI document of ``ragstore serve``, as ``docs/api/openapi.json`` keeps it:
``python -m ragstore.serve.openapi > docs/api/openapi.json`` (a test checks the two are equal)."""

from __future__ import annotations

import json
from typing import Any

from ragstore.serve.app import Settings, create_app


def document() -> dict[str, Any]:
    """The app's OpenAPI document (made without a database: nothing connects before the app starts)."""
    return create_app(Settings(dsn="")).openapi()


def text() -> str:
    return json.dumps(document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(text(), end="")
