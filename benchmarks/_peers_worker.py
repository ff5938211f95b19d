"""One store of the peers benchmark (benchmarks/peers.py), in its own virtual environment.

Run as ``python _peers_worker.py PEER DSN DATA.npz``; reads one JSON command per line on stdin and answers
one JSON line on stdout: ``ingest`` / ``reingest`` (seconds), ``count`` (rows in the store's table),
``query`` (``q``: query number, ``filter``: none | 1% | 10%) -> the ids returned and the milliseconds.
Only this file's standard-library imports and the peer's own packages are used, so it runs where ragstore
is not installed.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any

import numpy as np

BATCH = 1000
TABLE = "peers_bench"


def docs(data: Any) -> list[dict[str, Any]]:
    vectors, cat, grp = data["vectors"], data["cat"], data["grp"]
    return [
        {
            "id": f"r{i}",
            "doc": f"doc{i // 10}",
            "text": f"row {i} of document {i // 10}",
            "metadata": {"cat": int(cat[i]), "grp": int(grp[i])},
            "vector": vectors[i].tolist(),
        }
        for i in range(len(vectors))
    ]


def filter_of(name: str) -> dict[str, int] | None:
    return {"none": None, "1%": {"cat": 7}, "10%": {"grp": 3}}[name]


class Ragstore:
    def __init__(self, dsn: str, dim: int) -> None:
        from ragstore import Store
        from ragstore.embed.external import ExternalBackend

        self.store = Store(dsn)
        self.backend = ExternalBackend("peers-bench", dim)
        self.store.create_family("bench", self.backend)

    def ingest(self, rows: list[dict[str, Any]]) -> None:
        records = (
            {
                "chunk_id": r["id"],
                "package_path": r["doc"],
                "text": r["text"],
                "metadata": r["metadata"],
                "vector": r["vector"],
            }
            for r in rows
        )
        self.store.index(records, "bench", backend=self.backend)

    def count(self) -> int:
        with self.store.connection() as conn:
            return int(conn.execute("SELECT count(*) FROM ragstore.emb_bench").fetchone()[0])

    def query(self, vector: list[float], flt: dict[str, int] | None) -> list[str]:
        return [h.chunk_id for h in self.store.search("bench", vector=vector, k=10, metadata=flt)]


class LangChain:
    def __init__(self, dsn: str, dim: int) -> None:
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_postgres import Column, PGEngine, PGVectorStore

        self.engine = PGEngine.from_connection_string(url=dsn.replace("postgresql://", "postgresql+psycopg://", 1))
        self.engine.init_vectorstore_table(
            TABLE, dim, metadata_columns=[Column("cat", "INTEGER"), Column("grp", "INTEGER")]
        )
        self.store = PGVectorStore.create_sync(
            self.engine, DeterministicFakeEmbedding(size=dim), TABLE, metadata_columns=["cat", "grp"]
        )
        self.indexed = False
        self.back: dict[str, str] = {}

    def uid(self, row_id: str) -> str:
        """langchain-postgres keys rows by UUID: a stable one per row id."""
        value = str(uuid.uuid5(uuid.NAMESPACE_URL, row_id))
        self.back[value] = row_id
        return value

    def ingest(self, rows: list[dict[str, Any]]) -> None:
        from langchain_postgres.v2.indexes import HNSWIndex

        for start in range(0, len(rows), BATCH):
            part = rows[start : start + BATCH]
            self.store.add_embeddings(
                [r["text"] for r in part],
                [r["vector"] for r in part],
                [r["metadata"] for r in part],
                [self.uid(r["id"]) for r in part],
            )
        if not self.indexed:
            self.store.apply_vector_index(HNSWIndex())
            self.indexed = True

    def count(self) -> int:
        import psycopg

        with psycopg.connect(DSN) as conn:
            return int(conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0])

    def query(self, vector: list[float], flt: dict[str, int] | None) -> list[str]:
        found = self.store.similarity_search_by_vector(vector, k=10, filter=flt)
        return [self.back.get(str(d.id), str(d.id)) for d in found]


class LlamaIndex:
    def __init__(self, dsn: str, dim: int) -> None:
        from llama_index.vector_stores.postgres import PGVectorStore

        self.store = PGVectorStore.from_params(
            connection_string=dsn.replace("postgresql://", "postgresql+psycopg2://", 1),
            async_connection_string=dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
            table_name=TABLE,
            embed_dim=dim,
            hnsw_kwargs={
                "hnsw_m": 16,
                "hnsw_ef_construction": 64,
                "hnsw_ef_search": 40,
                "hnsw_dist_method": "vector_cosine_ops",
            },
        )

    def ingest(self, rows: list[dict[str, Any]]) -> None:
        from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

        for start in range(0, len(rows), BATCH):
            nodes = [
                TextNode(
                    text=r["text"],
                    id_=r["id"],
                    metadata=r["metadata"],
                    embedding=r["vector"],
                    relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=r["doc"])},
                )
                for r in rows[start : start + BATCH]
            ]
            self.store.add(nodes)

    def count(self) -> int:
        import psycopg

        with psycopg.connect(DSN) as conn:
            return int(conn.execute(f"SELECT count(*) FROM data_{TABLE}").fetchone()[0])

    def query(self, vector: list[float], flt: dict[str, int] | None) -> list[str]:
        from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery

        filters = None
        if flt:
            filters = MetadataFilters(filters=[MetadataFilter(key=k, value=v) for k, v in flt.items()])
        result = self.store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=10, filters=filters))
        return list(result.ids or [])


PEERS = {"ragstore": Ragstore, "langchain": LangChain, "llamaindex": LlamaIndex}
DSN = ""


def main() -> None:
    global DSN
    peer, DSN, path = sys.argv[1:4]
    out = sys.stdout
    sys.stdout = sys.stderr  # libraries that print must not break the protocol
    data = np.load(path)
    rows = docs(data)
    queries = data["queries"]
    store = PEERS[peer](DSN, int(data["vectors"].shape[1]))
    for line in sys.stdin:
        cmd = json.loads(line)
        started = time.perf_counter()
        answer: dict[str, Any] = {}
        if cmd["cmd"] in ("ingest", "reingest"):
            store.ingest(rows)
        elif cmd["cmd"] == "count":
            answer["rows"] = store.count()
        elif cmd["cmd"] == "query":
            answer["ids"] = store.query(queries[cmd["q"]].tolist(), filter_of(cmd["filter"]))
        elif cmd["cmd"] == "quit":
            break
        answer["seconds"] = time.perf_counter() - started
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
