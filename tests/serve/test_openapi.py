"""docs/api/openapi.json is the app's OpenAPI document, and the document is valid OpenAPI 3.1 in the parts
clients read: every operation answers JSON, every /v1 operation declares its errors' schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from ragstore.serve import openapi

DOC = Path(__file__).resolve().parents[2] / "docs" / "api" / "openapi.json"


def test_the_committed_document_is_the_apps() -> None:
    assert DOC.read_text(encoding="utf-8") == openapi.text(), (
        "docs/api/openapi.json is stale: python -m ragstore.serve.openapi > docs/api/openapi.json"
    )


def test_the_document_is_valid_openapi() -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    doc = json.loads(DOC.read_text(encoding="utf-8"))
    validator.validate(doc)  # raises naming the first violation of the OpenAPI 3.1 schema
    broken = {**doc, "info": {"title": "ragstore"}}
    with pytest.raises(Exception, match="version"):
        validator.validate(broken)  # the validator does refuse a document that breaks the schema


def test_the_document_names_every_endpoint_and_its_schemas() -> None:
    doc = json.loads(DOC.read_text(encoding="utf-8"))
    assert doc["openapi"].startswith("3.")
    operations = {(path, method) for path, item in doc["paths"].items() for method in item}
    assert operations == {
        ("/healthz", "get"),
        ("/v1/families", "get"),
        ("/v1/families/{family}/search", "post"),
        ("/v1/families/{family}/chunks", "get"),
        ("/v1/families/{family}/chunks", "post"),
        ("/v1/families/{family}/chunks", "delete"),
        ("/v1/memory/{agent}/recall", "post"),
        ("/v1/memory/{agent}/compose", "post"),
        ("/v1/memory/{agent}/records", "post"),
        ("/v1/context-pack", "post"),
    }
    schemas = doc["components"]["schemas"]
    search = schemas["SearchBody"]
    assert search["properties"]["k"]["maximum"] == 1000 and search["required"] == ["query"]
    assert search["additionalProperties"] is False
    for item in doc["paths"].values():
        for operation in item.values():
            responses = operation["responses"]
            assert operation["summary"] and "application/json" in responses["200"]["content"]
            assert "422" not in responses  # a bad request is 400 {"error": ...}, as the app answers
            for code in ("400", "401", "403", "404", "413", "503"):
                schema = responses[code]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, code
            for ref in json.dumps(operation).split('"$ref": "')[1:]:
                assert ref.split('"')[0].removeprefix("#/components/schemas/") in schemas
