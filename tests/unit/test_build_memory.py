"""The build-memory rule (ragstore/families/build_memory.py): what a 384-d HNSW build of 30k, 1M and 10M rows
gets in each storage, the floor, the caps (a quarter of the machine, $RAGSTORE_BUILD_MEMORY), the workers and
the memory that keeps them."""

import pytest

from ragstore.errors import InvalidInput
from ragstore.families import build_memory as bm

MB = 1024 * 1024
GB = 1024 * MB
BIG = 1024 * GB  # a cap that never binds: the rule's own size
# Bytes per element of a 384-d m-16 graph as pgvector 0.8 reported them (maintenance_work_mem divided by the
# tuples that fit: benchmarks/README.md, "HNSW build memory").
MEASURED_384 = {"vector": 2250, "halfvec": 1482, "bit": 763}


@pytest.mark.parametrize("storage", ["vector", "halfvec", "bit"])
def test_the_estimate_covers_what_pgvector_measured_and_no_more_than_5_percent_over(storage):
    per_row = bm.hnsw_need(1, storage, "vector", 384)
    assert MEASURED_384[storage] <= per_row <= 1.05 * MEASURED_384[storage]


# (storage, rows) -> the sized maintenance_work_mem in MiB, uncapped: rows x (value + 720) x 1.25, floor 64.
EXPECTED_MIB = {
    ("vector", 30_000): 80,  # 30k x 2264 B = 64.8 MiB, x 1.25
    ("vector", 1_000_000): 2698,
    ("vector", 10_000_000): 26988,
    ("halfvec", 30_000): 64,  # 53.5 MiB with the margin: the floor
    ("halfvec", 1_000_000): 1783,
    ("halfvec", 10_000_000): 17833,
    ("bit", 30_000): 64,
    ("bit", 1_000_000): 925,
    ("bit", 10_000_000): 9250,
}


@pytest.mark.parametrize(("storage", "rows"), sorted(EXPECTED_MIB))
def test_sizes_at_384_d_for_each_storage(storage, rows):
    size = bm.maintenance_bytes(bm.hnsw_need(rows, storage, "vector", 384), cap=BIG)
    assert size // MB == EXPECTED_MIB[(storage, rows)]


def test_a_halfvec_column_above_2000_d_is_counted_at_two_bytes_a_dimension():
    assert bm.value_bytes("vector", "halfvec", 3072) == bm.value_bytes("halfvec", "vector", 3072) == 8 + 6144


def test_the_cap_wins_over_the_need_and_over_the_floor():
    need = bm.hnsw_need(10_000_000, "vector", "vector", 384)
    assert bm.maintenance_bytes(need, cap=4 * GB) == 4 * GB
    assert bm.maintenance_bytes(0, cap=16 * MB) == 16 * MB  # a cap below the floor: the user's word
    assert bm.maintenance_bytes(0, cap=BIG) == bm.FLOOR


def test_the_default_cap_is_a_quarter_of_the_machine(monkeypatch):
    monkeypatch.delenv("RAGSTORE_BUILD_MEMORY", raising=False)
    monkeypatch.setattr(bm, "machine_memory", lambda: 8 * GB)
    assert bm.build_cap() == 2 * GB
    assert bm.maintenance_bytes(bm.hnsw_need(10_000_000, "bit", "vector", 384)) == 2 * GB
    assert bm.maintenance_bytes(bm.hnsw_need(30_000, "vector", "vector", 384)) // MB == 80


def test_the_variable_caps_the_build(monkeypatch):
    monkeypatch.setenv("RAGSTORE_BUILD_MEMORY", "512MB")
    assert bm.build_cap() == 512 * MB
    assert bm.maintenance_bytes(bm.hnsw_need(1_000_000, "vector", "vector", 384)) == 512 * MB


@pytest.mark.parametrize("value", ["lots", "12", "0MB"])
def test_a_bad_variable_is_refused_naming_it(monkeypatch, value):
    monkeypatch.setenv("RAGSTORE_BUILD_MEMORY", value)
    with pytest.raises(InvalidInput, match="RAGSTORE_BUILD_MEMORY"):
        bm.build_cap()


def test_postgresql_units():
    assert bm.setting(80 * MB) == "81920kB"
    assert bm.setting(10) == "1024kB"  # never under the server's minimum


@pytest.mark.parametrize(("cores", "workers"), [(1, 2), (2, 2), (3, 2), (4, 3), (8, 7), (64, 7)])
def test_workers_are_the_cores_beside_the_leader_and_never_fewer_than_the_servers_two(monkeypatch, cores, workers):
    monkeypatch.setattr(bm.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert bm.parallel_workers() == workers


@pytest.mark.parametrize(("workers", "mib"), [(0, 80), (1, 80), (2, 96), (3, 128), (7, 256)])
def test_the_memory_keeps_32mb_for_each_participant_so_postgresql_launches_every_worker(workers, mib):
    # 30k x 384 vector needs 80 MiB: enough for the leader and one worker, not for two or more
    need = bm.hnsw_need(30_000, "vector", "vector", 384)
    assert bm.maintenance_bytes(need, cap=BIG, workers=workers) // MB == mib


def test_a_cap_below_what_the_workers_need_still_wins():
    assert bm.maintenance_bytes(0, cap=64 * MB, workers=7) == 64 * MB
