"""Index storages on the local Citus cluster: a halfvec or bit family's shards carry the index in its storage,
every search path reads it (bit re-ranked exactly), check-recall measures it, and `family migrate --storage`
swaps it on the shards."""

from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.external import ExternalBackend
from ragstore.families import storage as storages
from ragstore.families.storage_migrate import migrate_storage
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search.api import search
from ragstore.search.recall import check_recall
from tests.toolkit.storage import DIM, INDEX_DEFINITION, ROWS, clustered, write_chunks

pytestmark = [pytest.mark.citus, pytest.mark.slow, pytest.mark.xdist_group("citus")]

EXPRESSION = {storage: definition.split("USING hnsw ")[1] for storage, definition in INDEX_DEFINITION.items()}


def shard_index_definitions(conn: psycopg.Connection[Any], table: str) -> list[str]:
    """The HNSW index definition of every shard placement of ``ragstore.<table>``, read on the workers."""
    rows = conn.execute(
        "SELECT success, result FROM run_command_on_placements(%s, "
        "$cmd$SELECT string_agg(pg_get_indexdef(indexrelid), ' | ') FROM pg_index i JOIN pg_class c "
        "ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
        "WHERE a.amname = 'hnsw' AND i.indrelid = '%%s'::regclass$cmd$)",
        (f"ragstore.{table}",),
    ).fetchall()
    assert rows and all(ok for ok, _ in rows), rows
    return [result for _, result in rows]


@pytest.mark.parametrize("storage", ["halfvec", "bit"])
def test_a_family_in_each_storage_is_searched_through_its_shards_index(
    citus_dsn: str, tmp_path: Path, storage: str
) -> None:
    name = f"store_{storage}"
    matrix = clustered(ROWS)
    with connect(citus_dsn) as conn:
        families.create_family(
            conn, name, ExternalBackend("mine", DIM), options={"dimensions": DIM, "storage": storage}
        )
        conn.commit()
        try:
            index_sources(conn, name, open_sources([str(write_chunks(tmp_path / "c.jsonl", matrix))]))
            conn.commit()
            family = families.get_family(conn, name)
            definitions = shard_index_definitions(conn, family.table)
            assert len(definitions) >= 2 and all(EXPRESSION[storage] in d for d in definitions), definitions

            q = matrix[7]
            for mode in ("hnsw", "exact"):
                hits = search(conn, name, vector=q, k=10, mode=mode)
                assert len(hits) == 10 and hits[0].chunk_id == "c0007"
                ids = [int(h.chunk_id[1:]) for h in hits]  # scores: the full vectors' cosine, best first
                assert [h.score for h in hits] == pytest.approx([float(matrix[i] @ q) for i in ids], abs=1e-3)
                assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            small = search(conn, name, vector=q, k=10, mode="hnsw", package="small/")
            assert len(small) == 10 and all(h.package_path == "small/" for h in small)
            tagged = search(conn, name, vector=q, k=10, mode="hnsw", metadata={"tag": 7})
            assert len(tagged) == 10 and all(h.metadata["tag"] == 7 for h in tagged) and tagged[0].chunk_id == "c0007"
            rows = conn.execute(
                "SELECT chunk_id FROM ragstore.search(%s, %s, 5)", (name, family.query_param(q))
            ).fetchall()
            assert len(rows) == 5 and rows[0][0] == "c0007"
            conn.commit()

            report = check_recall(conn, name, k=10, samples=40)
            assert report.storage == storage and report.recorded
            assert families.get_family(conn, name).options["recall"]["recall"] == pytest.approx(report.recall, abs=1e-4)
            exact_top = [f"c{i:04d}" for i in np.argsort(-(matrix @ matrix[3]), kind="stable")[:10]]
            found = [h.chunk_id for h in search(conn, name, vector=matrix[3], k=10, mode="hnsw")]
            assert found[0] == "c0003" and len(set(found) & set(exact_top)) >= 5  # recall itself: check-recall
        finally:
            conn.rollback()
            families.drop_family(conn, name)
            conn.commit()


def test_family_migrate_storage_swaps_the_index_on_every_shard(citus_dsn: str, tmp_path: Path) -> None:
    matrix = clustered(ROWS, seed=3)
    with connect(citus_dsn) as conn:
        families.create_family(
            conn, "store_swap", ExternalBackend("mine", DIM), options={"dimensions": DIM, "storage": "halfvec"}
        )
        conn.commit()
        try:
            index_sources(conn, "store_swap", open_sources([str(write_chunks(tmp_path / "c.jsonl", matrix))]))
            conn.commit()
            before = search(conn, "store_swap", vector=matrix[11], k=10, mode="exact")
            report = migrate_storage(conn, "store_swap", "bit", rerank_factor=storages.MAX_RERANK_FACTOR)
            assert (report.source, report.target, report.rebuilt) == ("halfvec", "bit", True)
            family = families.get_family(conn, "store_swap")
            definitions = shard_index_definitions(conn, family.table)
            assert all(EXPRESSION["bit"] in d and "halfvec_cosine_ops" not in d for d in definitions), definitions
            # the widest re-rank reads every row of a 600-row family: the exact answer, through the bit index
            hits = search(conn, "store_swap", vector=matrix[11], k=10, mode="hnsw")
            assert [h.chunk_id for h in hits] == [h.chunk_id for h in before]
        finally:
            conn.rollback()
            families.drop_family(conn, "store_swap")
            conn.commit()
