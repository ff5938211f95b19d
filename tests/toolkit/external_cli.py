"""Helpers several test modules share (once in cli/test_external_cli.py)."""

import json

import numpy as np


def vectors(n: int, dim: int = 8) -> np.ndarray:
    rng = np.random.default_rng(7)
    return rng.standard_normal((n, dim)).astype(np.float32)


def write_records(path, matrix, *, drop_vector_at=None):
    with path.open("w", encoding="utf-8") as out:
        for i, row in enumerate(matrix):
            record = {"chunk_id": f"c{i}", "package_path": "pkg", "text": f"text {i}"}
            if i != drop_vector_at:
                record["vector"] = [float(x) for x in row]
            out.write(json.dumps(record) + "\n")
    return path
