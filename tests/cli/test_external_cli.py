"""The ``external`` backend: a family for vectors made elsewhere, end to end through the CLI."""

import json

import numpy as np
from click.testing import CliRunner

from ragstore.cli.main import cli
from tests.toolkit.external_cli import vectors, write_records


def invoke(dsn, *args):
    return CliRunner().invoke(cli, ["--dsn", dsn, *args])


def test_external_family_indexes_given_vectors_and_searches_by_vector_file(dsn, tmp_path):
    created = invoke(dsn, "family", "create", "ext", "--backend", "external", "--dimensions", "8", "--model", "mine-8")
    assert created.exit_code == 0, created.output
    assert "external/mine-8, 8-d" in created.output
    matrix = vectors(20)
    src = write_records(tmp_path / "c.jsonl", matrix)
    indexed = invoke(dsn, "index", "ext", str(src), "--json")
    assert indexed.exit_code == 0, indexed.output
    assert json.loads(indexed.output)["inserted"] == 20
    query = tmp_path / "q.json"
    query.write_text(json.dumps([float(x) for x in matrix[3]]))
    found = invoke(dsn, "search", "ext", "--vector-file", str(query), "-k", "1", "--json")
    assert found.exit_code == 0, found.output
    assert json.loads(found.output)["hits"][0]["chunk_id"] == "c3"
    npy = tmp_path / "q.npy"
    np.save(npy, matrix[5])
    found = invoke(dsn, "search", "ext", "--vector-file", str(npy), "-k", "1", "--json")
    assert json.loads(found.output)["hits"][0]["chunk_id"] == "c5"


def test_external_family_needs_model_and_dimensions(dsn):
    no_dim = invoke(dsn, "family", "create", "ext", "--backend", "external", "--model", "mine")
    assert no_dim.exit_code != 0 and "--dimensions" in no_dim.output
    no_model = invoke(dsn, "family", "create", "ext", "--backend", "external", "--dimensions", "8")
    assert no_model.exit_code != 0 and "--model" in no_model.output


def test_external_index_names_the_first_record_without_a_vector_and_writes_nothing(dsn, tmp_path):
    invoke(dsn, "family", "create", "ext", "--backend", "external", "--dimensions", "8", "--model", "mine-8")
    src = write_records(tmp_path / "c.jsonl", vectors(10), drop_vector_at=6)
    result = invoke(dsn, "index", "ext", str(src))
    assert result.exit_code != 0
    assert f"{src}:7: vector: missing" in result.output
    assert "Traceback" not in result.output
    shown = json.loads(invoke(dsn, "family", "show", "ext", "--json").output)
    assert shown["rows"] == 0


def test_external_text_search_says_to_give_a_vector(dsn, tmp_path):
    invoke(dsn, "family", "create", "ext", "--backend", "external", "--dimensions", "8", "--model", "mine-8")
    invoke(dsn, "index", "ext", str(write_records(tmp_path / "c.jsonl", vectors(5))))
    result = invoke(dsn, "search", "ext", "text 3")
    assert result.exit_code != 0
    assert "--vector-file" in result.output and "Traceback" not in result.output
    # Full text needs no vector.
    fts = invoke(dsn, "search", "ext", "text", "--mode", "fts", "--json")
    assert fts.exit_code == 0, fts.output
    both = invoke(dsn, "search", "ext", "text", "--vector-file", "x.json")
    assert both.exit_code != 0 and "not both" in both.output


def test_vector_file_of_the_wrong_dimension_is_one_line(dsn, tmp_path):
    invoke(dsn, "family", "create", "ext", "--backend", "external", "--dimensions", "8", "--model", "mine-8")
    invoke(dsn, "index", "ext", str(write_records(tmp_path / "c.jsonl", vectors(5))))
    query = tmp_path / "q.json"
    query.write_text("[1, 2, 3]")
    result = invoke(dsn, "search", "ext", "--vector-file", str(query))
    assert result.exit_code != 0 and "3 dimensions" in result.output
