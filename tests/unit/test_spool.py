"""Spools left by a killed indexer (standard input, parsed batches) are removed by the next run."""

import os

from ragstore.ingest.spool import remove_stale_spools, spool_dir


def test_spools_of_dead_processes_are_removed_and_live_ones_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSTORE_HOME", str(tmp_path))
    folder = spool_dir()
    dead = 2**22 + 12345  # above the default pid_max: no process has it
    names = [f"stdin-{dead}-a.jsonl", f"parsed-{dead}-b.bin", f"parsed-{os.getpid()}-c.bin", "other.txt"]
    for name in names:
        (folder / name).write_bytes(b"x")
    removed = sorted(p.name for p in remove_stale_spools())
    assert removed == sorted(names[:2])
    assert sorted(p.name for p in folder.iterdir()) == sorted(names[2:])
