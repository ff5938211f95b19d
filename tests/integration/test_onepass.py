"""The one pass of ``ragstore index``: byte-level change detection, one parse, vectorised vector checks."""

import json

import numpy as np
import pytest

from ragstore import families
from ragstore.embed.external import ExternalBackend
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.ingest import fast
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources

DIM = 8


@pytest.fixture
def family(conn):
    return families.create_family(conn, "ext", ExternalBackend("mine", DIM), options={"dimensions": DIM})


def lines(n, *, dim=DIM, seed=1, changed=()):
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((n, dim)).astype(np.float32)
    out = []
    for i in range(n):
        text = f"text {i}" + (" changed" if i in changed else "")
        out.append({"chunk_id": f"c{i}", "package_path": "p", "text": text, "vector": [float(x) for x in matrix[i]]})
    return out


def write(path, records, **dumps):
    path.write_text("".join(json.dumps(r, **dumps) + "\n" for r in records), encoding="utf-8")
    return path


def run(conn, path, **kw):
    return index_sources(conn, "ext", open_sources([str(path)]), **kw)


def test_unchanged_rerun_parses_no_line(conn, family, tmp_path, monkeypatch):
    src = write(tmp_path / "a.jsonl", lines(30))
    first = run(conn, src)
    assert first.inserted == 30
    parsed = []
    real = fast.fast_record
    monkeypatch.setattr(fast, "fast_record", lambda line: parsed.append(line) or real(line))
    second = run(conn, src)
    assert (second.inserted, second.updated, second.unchanged) == (0, 0, 30)
    assert parsed == []
    # One changed line: only it is parsed and written.
    write(src, lines(30, changed={7}))
    third = run(conn, src)
    assert (third.inserted, third.updated, third.unchanged) == (0, 1, 29)
    assert len(parsed) == 1


def test_same_record_in_other_bytes_is_unchanged_and_learns_its_new_hash(conn, family, tmp_path):
    records = lines(10)
    src = write(tmp_path / "a.jsonl", records)
    run(conn, src)
    write(src, records, indent=None, separators=(", ", ": "), sort_keys=True)
    again = run(conn, src)
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 10)
    hashes = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE source_sha256 IS NOT NULL").fetchone()[0]
    assert hashes == 10
    third = run(conn, src)
    assert third.unchanged == 10


def test_a_text_changed_behind_the_writers_back_is_written_again(conn, family, tmp_path):
    src = write(tmp_path / "a.jsonl", lines(5))
    run(conn, src)
    conn.execute(
        "UPDATE ragstore.chunks SET text = 'tampered', content_sha256 = sha256('tampered') WHERE chunk_id = 'c2'"
    )
    conn.commit()
    again = run(conn, src)
    assert again.updated == 1
    assert conn.execute("SELECT text FROM ragstore.chunks WHERE chunk_id = 'c2'").fetchone()[0] == "text 2"


def test_vector_problems_name_the_line_and_nothing_is_written(conn, family, tmp_path):
    records = lines(12)
    records[9]["vector"] = records[9]["vector"][:5]
    with pytest.raises(ModelMismatch, match=r"a\.jsonl:10: vector: 5 dimensions"):
        run(conn, write(tmp_path / "a.jsonl", lines(3) and records))
    records = lines(12)
    records[4]["vector"][2] = 1e39
    with pytest.raises(InvalidInput, match=r"a\.jsonl:5: vector"):
        run(conn, write(tmp_path / "a.jsonl", records))
    records = lines(12)
    records[6]["vector"][0] = True
    with pytest.raises(InvalidInput, match=r"a\.jsonl:7: vector\.0"):
        run(conn, write(tmp_path / "a.jsonl", records))
    assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone()[0] == 0


def test_duplicates_first_occurrence_wins_across_changed_and_unchanged(conn, family, tmp_path):
    records = lines(4)
    src = write(tmp_path / "a.jsonl", records)
    run(conn, src)
    dup = dict(records[1], text="a different text")
    report = run(conn, write(src, [*records, dup]))
    assert (report.unchanged, report.duplicates) == (4, 1)
    assert conn.execute("SELECT text FROM ragstore.chunks WHERE chunk_id = 'c1'").fetchone()[0] == "text 1"


def test_the_spool_is_removed_after_the_run(conn, family, tmp_path, monkeypatch):
    from ragstore.ingest import spool as spool_module
    from ragstore.ingest.spool import spool_dir

    monkeypatch.setenv("RAGSTORE_HOME", str(tmp_path / "home"))  # this test's own spool folder
    made = []
    real_dir = spool_module.spool_dir

    def recording_dir(*args, **kwargs):
        made.append(1)
        return real_dir(*args, **kwargs)

    monkeypatch.setattr(spool_module, "spool_dir", recording_dir)
    run(conn, write(tmp_path / "a.jsonl", lines(5)))
    assert made, "the run spooled nothing"
    assert not list(spool_dir().glob("parsed-*"))


@pytest.mark.parametrize(
    ("value", "field"),
    [("null", "vector.2"), ('"x"', "vector.2"), ("[1]", "vector.2"), ("{}", "vector.2"), ("false", "vector.2")],
)
def test_a_vector_element_that_is_not_a_number_is_named(conn, family, tmp_path, value, field):
    records = [json.dumps(r) for r in lines(6)]
    bad = lines(6)[3]
    bad["vector"][2] = "@"
    records[3] = json.dumps(bad).replace('"@"', value)
    src = tmp_path / "a.jsonl"
    src.write_text("\n".join(records) + "\n")
    with pytest.raises(InvalidInput, match=rf"a\.jsonl:4: {field}"):
        run(conn, src)
    assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone()[0] == 0


def test_a_vector_element_given_as_text_is_refused_not_converted(conn, family, tmp_path):
    records = lines(5)
    records[2]["vector"][0] = "0.5"
    with pytest.raises(InvalidInput, match=r"a\.jsonl:3: vector\.0"):
        run(conn, write(tmp_path / "a.jsonl", records))
