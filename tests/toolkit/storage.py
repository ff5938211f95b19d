"""Rows and index definitions shared by the storage tests (one node and Citus)."""

import json

import numpy as np

DIM = 32
ROWS = 600
STORAGES = ["vector", "halfvec", "bit"]


def clustered(n, dim=DIM, seed=7):
    """Unit vectors around 12 centres, as embeddings of a few topics are."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((12, dim))
    points = centres[rng.integers(0, 12, n)] + 0.35 * rng.standard_normal((n, dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def write_chunks(path, matrix):
    words = ["copy", "move", "remove", "list", "find", "sort"]
    with path.open("w") as out:
        for i, row in enumerate(matrix):
            record = {
                "chunk_id": f"c{i:04d}",
                "package_path": "small/" if i < 30 else "big/",
                "text": f"{words[i % 6]} files {i}",
                "metadata": {"tag": i % 10},
                "vector": [float(x) for x in row],
            }
            out.write(json.dumps(record) + "\n")
    return path


INDEX_DEFINITION = {
    "vector": "USING hnsw (embedding vector_cosine_ops)",
    "halfvec": "USING hnsw (((embedding)::halfvec(32)) halfvec_cosine_ops)",
    "bit": "USING hnsw (((binary_quantize(embedding))::bit(32)) bit_hamming_ops)",
}
