"""One real family per storage (vector, halfvec), each in its own table with its own HNSW index, searched
through ``Store.search`` in one run: the time per search, recall@10 against the exact top 10 (numpy, cosine,
over the same rows) and the index the plan used (``Store.explain`` with ``analyze``). A check of
``benchmarks/storage.py``, which builds the storages' indexes side by side on one table.

    python benchmarks/storage_family.py --dim 1536 --rows 15000
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from ragstore import Store
from ragstore.embed.external import ExternalBackend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=1536)
    parser.add_argument("--rows", type=int, default=15000)
    parser.add_argument("--searches", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    matrix = rng.standard_normal((args.rows, args.dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    path = Path(tempfile.mkdtemp()) / "vectors.jsonl"
    with path.open("w") as out:
        for i, row in enumerate(matrix):
            record = {"chunk_id": f"c{i}", "package_path": "p/", "text": f"t {i}", "vector": row.tolist()}
            out.write(json.dumps(record) + "\n")
    warnings.simplefilter("ignore")
    with Store.embedded() as store:
        for storage in ("vector", "halfvec"):
            name = f"sf_{storage}"
            if any(f.name == name for f in store.families()):
                store.drop_family(name)
            backend = ExternalBackend("random", args.dim)
            store.create_family(name, backend, options={"dimensions": args.dim}, storage=storage)
            store.index_files([str(path)], name)
            queries = matrix[rng.integers(0, args.rows, args.searches)]
            for q in queries[:3]:
                store.search(name, vector=q, k=10, mode="hnsw")
            times = []
            recalls = []
            for q in queries:
                started = time.perf_counter()
                hits = store.search(name, vector=q, k=10, mode="hnsw")
                times.append((time.perf_counter() - started) * 1000)
                exact = {f"c{j}" for j in np.argsort(-(matrix @ q), kind="stable")[:10]}
                recalls.append(len({h.chunk_id for h in hits} & exact) / 10)
            plan = str(store.explain(name, vector=queries[0], k=10, mode="hnsw", analyze=True))
            used = sorted(set(re.findall(r"Index Scan using (\w*hnsw\w*)|Seq Scan on (emb_\w+)", plan)))
            print(
                f"{storage:>8} | {args.rows:,} x {args.dim} | p50 {np.percentile(times, 50):.2f} ms"
                f" | p95 {np.percentile(times, 95):.2f} ms | recall@10 {np.mean(recalls):.3f}"
                f" | plan: {[a or f'seq scan {b}' for a, b in used]}"
            )
            store.drop_family(name)


if __name__ == "__main__":
    main()
