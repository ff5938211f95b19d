"""Parquet and .npy + JSONL sidecar inputs: streamed, checked per batch, with file/row/field errors."""

import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from ragstore import families  # noqa: E402
from ragstore.embed.external import ExternalBackend  # noqa: E402
from ragstore.errors import InvalidInput, ModelMismatch  # noqa: E402
from ragstore.ingest.readers import open_sources  # noqa: E402
from ragstore.ingest.run import index_sources  # noqa: E402

DIM = 8


@pytest.fixture
def family(conn):
    return families.create_family(conn, "ext", ExternalBackend("mine", DIM), options={"dimensions": DIM})


def matrix(n, seed=3):
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def table(n, *, fixed=True, vectors=None, **extra):
    m = matrix(n) if vectors is None else vectors
    flat = pa.array(m.reshape(-1), type=pa.float32())
    vec = (
        pa.FixedSizeListArray.from_arrays(flat, DIM)
        if fixed
        else pa.ListArray.from_arrays(pa.array(np.arange(0, n * DIM + 1, DIM, dtype=np.int32)), flat)
    )
    columns = {
        "chunk_id": pa.array([f"c{i}" for i in range(n)]),
        "package_path": pa.array(["p"] * n),
        "text": pa.array([f"text {i}" for i in range(n)]),
        "vector": vec,
    }
    columns.update(extra)
    return pa.table(columns)


def run(conn, path, **kw):
    return index_sources(conn, "ext", open_sources([str(path)], columns=kw.pop("columns", None)), **kw)


@pytest.mark.parametrize("fixed", [True, False])
def test_parquet_loads_vectors_exactly_and_reruns_unchanged(conn, family, tmp_path, fixed):
    path = tmp_path / "v.parquet"
    pq.write_table(table(50, fixed=fixed), path, row_group_size=16)
    first = run(conn, path, batch_size=20)
    assert first.inserted == 50
    stored = conn.execute("SELECT embedding FROM ragstore.emb_ext WHERE chunk_id = 'c7'").fetchone()[0]
    assert np.array_equal(np.asarray(stored.to_numpy(), dtype=np.float32), matrix(50)[7])
    again = run(conn, path)
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 50)


def test_parquet_columns_are_mapped_by_flags_and_metadata_built_from_columns(conn, family, tmp_path):
    t = table(4).rename_columns(["id", "package_path", "body", "emb"])
    t = t.append_column("lang", pa.array(["en", "fr", "en", "de"]))
    path = tmp_path / "m.parquet"
    pq.write_table(t, path)
    mapping = {"chunk_id": "id", "text": "body", "vector": "emb", "metadata": "lang,package_path"}
    report = run(conn, path, columns=mapping)
    assert report.inserted == 4
    meta = conn.execute("SELECT metadata FROM ragstore.chunks WHERE chunk_id = 'c1'").fetchone()[0]
    assert meta == {"lang": "fr", "package_path": "p"}


def test_parquet_bad_inputs_name_file_row_and_field_and_write_nothing(conn, family, tmp_path):
    corrupt = tmp_path / "corrupt.parquet"
    pq.write_table(table(10), corrupt)
    data = corrupt.read_bytes()
    corrupt.write_bytes(data[: len(data) // 2] + data[-8:])  # footer length and magic kept, the rest cut
    with pytest.raises(InvalidInput, match=r"corrupt\.parquet: (not a readable|corrupt) Parquet"):
        run(conn, corrupt)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"not parquet at all")
    with pytest.raises(InvalidInput, match=r"garbage\.parquet: not a readable Parquet file"):
        run(conn, garbage)

    null_vec = tmp_path / "null.parquet"
    t = table(6, fixed=False)
    vectors = t.column("vector").to_pylist()
    vectors[4] = None
    t = t.set_column(3, "vector", pa.array(vectors, type=pa.list_(pa.float32())))
    pq.write_table(t, null_vec)
    with pytest.raises(InvalidInput, match=r"null\.parquet: row 5: vector: null"):
        run(conn, null_vec)

    short = tmp_path / "short.parquet"
    vectors = [list(map(float, row)) for row in matrix(6)]
    vectors[2] = vectors[2][:5]
    t = table(6).set_column(3, "vector", pa.array(vectors, type=pa.list_(pa.float32())))
    pq.write_table(t, short)
    with pytest.raises(ModelMismatch, match=r"short\.parquet: row 3: vector: 5 dimensions"):
        run(conn, short)

    bad_id = tmp_path / "blank.parquet"
    t = table(3).set_column(0, "chunk_id", pa.array(["a", " ", "c"]))
    pq.write_table(t, bad_id)
    with pytest.raises(InvalidInput, match=r"blank\.parquet: row 2: chunk_id"):
        run(conn, bad_id)

    inf = tmp_path / "inf.parquet"
    m = matrix(4)
    m[3, 1] = np.inf
    pq.write_table(table(4, vectors=m), inf)
    with pytest.raises(InvalidInput, match=r"inf\.parquet: row 4: vector\[1\] is inf"):
        run(conn, inf)
    assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone()[0] == 0


def test_npy_with_jsonl_sidecar(conn, family, tmp_path):
    m = matrix(7)
    np.save(tmp_path / "v.npy", m)
    (tmp_path / "v.jsonl").write_text(
        "".join(json.dumps({"chunk_id": f"c{i}", "package_path": "p", "text": f"t {i}"}) + "\n" for i in range(7))
    )
    assert run(conn, tmp_path / "v.npy").inserted == 7
    assert run(conn, tmp_path / "v.npy").unchanged == 7
    (tmp_path / "v.jsonl").write_text(
        "".join(json.dumps({"chunk_id": f"c{i}", "package_path": "p", "text": f"t {i}"}) + "\n" for i in range(6))
    )
    with pytest.raises(InvalidInput, match="6 records for the 7 rows"):
        run(conn, tmp_path / "v.npy")


def test_parquet_without_vectors_is_embedded_by_the_family_backend(conn, tmp_path):
    from ragstore.embed.offline import OfflineBackend

    families.create_family(conn, "docs", OfflineBackend())
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"chunk_id": ["a", "b"], "package_path": ["p", "p"], "text": ["one", "two"]}), path)
    report = index_sources(conn, "docs", open_sources([str(path)]))
    assert (report.inserted, report.embedded) == (2, 2)
    assert index_sources(conn, "docs", open_sources([str(path)])).unchanged == 2


def test_parquet_errors_reach_the_cli_as_one_line(dsn, tmp_path):
    from click.testing import CliRunner

    from ragstore.cli.main import cli

    runner = CliRunner()
    runner.invoke(
        cli, ["--dsn", dsn, "family", "create", "ext", "--backend", "external", "--dimensions", "8", "--model", "mine"]
    )
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1 garbage")
    result = runner.invoke(cli, ["--dsn", dsn, "index", "ext", str(path)])
    assert result.exit_code == 1
    assert "bad.parquet: not a readable Parquet file" in result.output and "Traceback" not in result.output
    wrong = runner.invoke(cli, ["--dsn", dsn, "index", "ext", str(path), "--column", "nope=x"])
    assert wrong.exit_code != 0 and "--column 'nope=x'" in wrong.output


def test_parquet_is_streamed_without_keeping_the_row_groups_read(tmp_path):
    from ragstore.ingest.columnar import _parquet_batches

    dim, groups, rows = 64, 8, 2000
    path = tmp_path / "big.parquet"
    m = np.random.default_rng(1).standard_normal((groups * rows, dim)).astype(np.float32)
    t = pa.table(
        {
            "chunk_id": pa.array([f"c{i}" for i in range(groups * rows)]),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(m.reshape(-1)), dim),
        }
    )
    pq.write_table(t, path, row_group_size=rows)
    held = []
    for batch in _parquet_batches(path, "big.parquet", ["chunk_id", "vector"], 500):
        assert batch.num_rows == 500
        held.append(pa.total_allocated_bytes())
    # The vectors are 4 MB in 8 row groups; a pre-buffering reader holds the whole file's bytes (measured:
    # 7.9 MB from the first batch on), a streaming one a row group or two (2.3 MB).
    assert max(held) < m.nbytes, max(held)
