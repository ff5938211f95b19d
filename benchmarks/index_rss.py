"""Peak RSS and embed rate of one ``ragstore index`` run into a MiniLM family (a fresh database).

    python benchmarks/index_rss.py --dataset PATH/TO/manpages/corpus.jsonl [--dsn ...] [--limit N]
    python benchmarks/index_rss.py --build-folder MB [--dsn ...]

PATH is anything ``ragstore index`` reads (a JSONL file, a folder of documents). ``--build-folder MB``
indexes instead a folder built in a temporary directory from this machine's documentation (nothing is
committed or downloaded): the files under /usr/share/common-licenses, /usr/share/doc, /usr/share/info and
/usr/share/man that a reader reads, in sorted order, until their text (gunzipped) reaches MB megabytes;
should they run out, the plain-text ones are copied again with a marker ending every paragraph, so that
no copy's chunks are those of another (the embedding cache would spare their model calls). The run
indexes with ``--skip-bad-files``; the folder's size, files and chunks are printed. The run is a child
process (``python -m ragstore.cli index rss PATH``) whose VmRSS is read from /proc every 0.2 s; its peak,
the wall time, the report line (with the embed rate) and ``uptime`` before and after are printed.
Without ``--dsn`` / ``$RAGSTORE_DSN`` an embedded server is started in a temporary folder.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _db import admin_dsn, scratch_database

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.minilm import MiniLMBackend


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


ROOTS = ("/usr/share/common-licenses", "/usr/share/doc", "/usr/share/info", "/usr/share/man")
TEXT = (".txt", ".md", ".markdown", ".rst", ".html", ".htm")
MAN = re.compile(r"\.[1-9][a-z]*(\.gz)?$")
PLAIN = re.compile(r"(README|AUTHORS|NEWS|THANKS|TODO|FAQ|copyright)(\.gz)?$")


def _text_of(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def _candidates() -> list[Path]:
    found = []
    for root in ROOTS:
        for path in sorted(Path(root).rglob("*")):
            name = path.name.removesuffix(".gz")
            if path.is_file() and not path.is_symlink():
                if name.endswith(TEXT) or MAN.search(path.name) or PLAIN.fullmatch(path.name):
                    found.append(path)
    return found


def build_folder(target: Path, megabytes: float) -> tuple[int, int]:
    """Fill ``target`` with local documentation up to ``megabytes`` of text; (files, bytes of text)."""
    want = int(megabytes * 1e6)
    files = total = 0
    copy = 0
    plain: list[Path] = []
    while total < want:
        pool = _candidates() if copy == 0 else plain
        if not pool:
            break
        for path in pool:
            if total >= want:
                break
            try:
                text = _text_of(path)
            except (OSError, EOFError, gzip.BadGzipFile):
                continue
            if copy == 0:
                out = target / "0" / path.relative_to("/")
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(path.read_bytes())
                if path.name.removesuffix(".gz").endswith((".txt", ".md")) or PLAIN.fullmatch(path.name):
                    plain.append(path)
            else:
                marked = re.sub(rb"\n\s*\n", f" (copy {copy})\n\n".encode(), text)
                out = target / str(copy) / path.relative_to("/").with_suffix("").with_suffix(".txt")
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(marked)
                text = marked
            files += 1
            total += len(text)
        copy += 1
    return files, total


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=None, help="what to index: a JSONL file or a folder")
    parser.add_argument("--build-folder", type=float, default=0, metavar="MB", help="index MB of local docs")
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--limit", type=int, default=0, help="index the first N JSONL lines only (0: all)")
    parser.add_argument("--batch-size", type=int, default=0, help="ragstore index --batch-size (0: its default)")
    args = parser.parse_args()
    if not args.dataset and not args.build_folder:
        parser.error("give --dataset or --build-folder")
    source = Path(args.dataset or "")
    with tempfile.TemporaryDirectory() as tmp, admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        if args.build_folder:
            source = Path(tmp) / "docs"
            files, size = build_folder(source, args.build_folder)
            print(json.dumps({"folder_files": files, "folder_text_mb": round(size / 1e6, 1)}), flush=True)
        if args.limit and source.is_file():
            cut = Path(tmp) / "corpus.jsonl"
            with source.open(encoding="utf-8") as lines, cut.open("w", encoding="utf-8") as out:
                for n, line in enumerate(lines):
                    if n == args.limit:
                        break
                    out.write(line)
            source = cut
        with connect(dsn) as conn:
            families.create_family(conn, "rss", MiniLMBackend())
        print("before:", _uptime(), flush=True)
        command = [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, "index", "rss", str(source), "--no-progress"]
        if args.batch_size:
            command += ["--batch-size", str(args.batch_size)]
        if args.build_folder:
            command += ["--skip-bad-files"]
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak = 0
        while child.poll() is None:
            peak = max(peak, _rss_kb(child.pid))
            time.sleep(0.2)
        out, err = child.communicate()
        seconds = time.perf_counter() - started
        print("after:", _uptime())
        if child.returncode != 0:
            sys.exit(f"ragstore index failed: {err.strip()}")
        print(out.strip())
        print(
            json.dumps(
                {
                    "dataset": str(args.dataset or f"--build-folder {args.build_folder:g}"),
                    "peak_rss_mb": round(peak / 1024, 1),
                    "seconds": round(seconds, 1),
                }
            )
        )


if __name__ == "__main__":
    main()
