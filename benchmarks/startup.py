"""Start-up time of the command line: the median of N runs of ``ragstore --help`` and of a search process,
and the modules that cost the most to import in a search.

It sets up its own RAGSTORE_HOME (a temporary folder with an embedded server, stopped and removed at the
end) with a small offline family indexed from examples/sample.jsonl, so the search is a whole process
against a running server: start Python, import, connect, search, print.

    python benchmarks/startup.py [--runs 5] [--top 15]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAMILY = "startup"
QUERY = "copy files and directories"


def ragstore_exe() -> str:
    beside = Path(sys.executable).parent / "ragstore"
    found = str(beside) if beside.exists() else shutil.which("ragstore")
    if not found:
        sys.exit("ragstore is not installed in this environment (pip install -e .)")
    return found


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, check=True, timeout=600)


def median_seconds(args: list[str], env: dict[str, str], runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run(args, env)
        times.append(time.perf_counter() - started)
    return statistics.median(times), times


def import_offenders(args: list[str], env: dict[str, str], top: int) -> list[tuple[int, int, str]]:
    """(cumulative µs, self µs, module) of the packages and ragstore modules that cost the most to import,
    from ``python -X importtime`` (a package's cumulative time includes what it imports)."""
    err = run([sys.executable, "-X", "importtime", *args], env).stderr
    best: dict[str, tuple[int, int, str]] = {}
    for line in err.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| *(\S+)", line)
        if not m:
            continue
        module = m.group(3)
        if "." in module and not module.startswith("ragstore."):
            continue  # a submodule of a third-party package: counted in the package
        row = (int(m.group(2)), int(m.group(1)), module)
        best[module] = max(best.get(module, row), row)
    return sorted(best.values(), reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()

    exe = ragstore_exe()
    home = Path(tempfile.mkdtemp(prefix="ragstore-startup-"))
    env = {k: v for k, v in os.environ.items() if k != "RAGSTORE_DSN"}
    env["RAGSTORE_HOME"] = str(home)
    try:
        run([exe, "migrate"], env)
        run([exe, "family", "create", FAMILY, "--backend", "offline"], env)
        run([exe, "index", FAMILY, str(ROOT / "examples" / "sample.jsonl"), "--no-progress"], env)
        run([exe, "search", FAMILY, QUERY], env)  # warm: the server's caches, the OS file cache

        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        print(f"load average before: {load}; {os.cpu_count()} cores; median of {args.runs} runs")
        help_median, help_times = median_seconds([exe, "--help"], env, args.runs)
        search_median, search_times = median_seconds([exe, "search", FAMILY, QUERY, "-k", "5"], env, args.runs)
        print(f"ragstore --help                    {help_median:6.3f} s  (runs: {_fmt(help_times)})")
        print(f"ragstore search {FAMILY} {QUERY!r}  {search_median:6.3f} s  (runs: {_fmt(search_times)})")

        print(f"\ntop {args.top} imports of the search process (python -X importtime; µs):")
        print(f"{'cumulative':>11} {'self':>9}  module")
        search_args = ["-m", "ragstore.cli", "search", FAMILY, QUERY, "-k", "5"]
        for cumulative, own, module in import_offenders(search_args, env, args.top):
            print(f"{cumulative:>11} {own:>9}  {module}")
    finally:
        subprocess.run([exe, "server", "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(home, ignore_errors=True)


def _fmt(times: list[float]) -> str:
    return ", ".join(f"{t:.3f}" for t in times)


if __name__ == "__main__":
    main()
