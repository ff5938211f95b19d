"""Peak RSS and embed rate of one ``ragstore index`` run into a MiniLM family (a fresh database).

    python benchmarks/index_rss.py --dataset PATH/TO/manpages/corpus.jsonl [--dsn ...] [--limit N]
    python benchmarks/index_rss.py --build-folder MB [--folder DIR] [--backend offline] [--minutes M]

PATH is anything ``ragstore index`` reads (a JSONL file, a folder of documents). ``--build-folder MB``
indexes instead a folder built in a temporary directory from this machine's documentation (nothing is
committed or downloaded): the files under /usr/share/common-licenses, /usr/share/doc, /usr/share/info and
/usr/share/man that a reader reads, in sorted order, until their text (gunzipped) reaches MB megabytes;
should they run out, the plain-text ones are copied again with a marker ending every paragraph, so that
no copy's chunks are those of another (the embedding cache would spare their model calls). The PDFs and
Word files found there and the documentation of the installed Python packages (``*.dist-info``: the
extensionless METADATA and LICENSE files, ``.md``, ``.rst``, ``.txt``) are taken first, so that every
format is in the folder. ``--folder DIR`` builds it in DIR instead (kept, and reused when DIR already
holds files). The run indexes with ``--skip-bad-files``; the folder's size and files are printed.

The run is a child process (``python -m ragstore.cli index rss PATH``) whose VmRSS is read from /proc
every 0.2 s; every minute a line gives that minute's peak RSS and the chunks committed so far (counted in
the family's table). ``--backend offline`` indexes into an offline family (fingerprint vectors: the
read, chunk and write pipeline without a model); ``--minutes M`` stops the run (SIGINT, then SIGTERM
30 s later) after M minutes, and the chunks it committed give the embed rate (their word pieces counted with the MiniLM
tokenizer). The peak, the wall time, the report line (with the embed rate) and ``uptime`` before and
after are printed. Without ``--dsn`` / ``$RAGSTORE_DSN`` an embedded server is started in a temporary
folder.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _db import admin_dsn, scratch_database

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.minilm import MiniLMBackend
from ragstore.embed.offline import OfflineBackend


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
BINARY = (".pdf", ".docx")
MAN = re.compile(r"\.[1-9][a-z]*(\.gz)?$")
PLAIN = re.compile(r"(README|AUTHORS|NEWS|THANKS|TODO|FAQ|copyright)(\.gz)?$")
DIST_INFO = re.compile(r"(METADATA|LICENSE[^/]*|.*\.(md|rst|txt))$")


def _text_of(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix in BINARY:
        return data  # counted by its bytes
    return gzip.decompress(data) if path.suffix == ".gz" else data


def _first() -> list[Path]:
    """The PDFs and Word files of the documentation roots, and the installed packages' own documentation."""
    found = [p for root in ROOTS for p in sorted(Path(root).rglob("*")) if p.suffix in BINARY and p.is_file()]
    for site in sorted({Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()}):
        for info in sorted(site.glob("*.dist-info")):
            found += [p for p in sorted(info.rglob("*")) if p.is_file() and DIST_INFO.fullmatch(p.name)]
    return found


def _candidates() -> list[Path]:
    found = _first()
    for root in ROOTS:
        for path in sorted(Path(root).rglob("*")):
            name = path.name.removesuffix(".gz")
            if path.is_file() and not path.is_symlink():
                if name.endswith(TEXT) or MAN.search(path.name) or PLAIN.fullmatch(path.name):
                    found.append(path)
    return found


def _place(path: Path) -> Path:
    """Where a file goes in the folder: a package's documentation under ``python/`` (a walk does not enter
    a ``.venv``), the others at their own path."""
    parts = path.parts
    if "site-packages" in parts:
        return Path("python", *parts[parts.index("site-packages") + 1 :])
    return path.relative_to(path.anchor)


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
                out = target / "0" / _place(path)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(path.read_bytes())
                if path.name.removesuffix(".gz").endswith((".txt", ".md")) or PLAIN.fullmatch(path.name):
                    plain.append(path)
            else:
                marked = re.sub(rb"\n\s*\n", f" (copy {copy})\n\n".encode(), text)
                out = target / str(copy) / path.relative_to(path.anchor).with_suffix("").with_suffix(".txt")
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(marked)
                text = marked
            files += 1
            total += len(text)
        copy += 1
    return files, total


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _chunks(dsn: str) -> int:
    """The chunks the run committed so far (a connection of its own, so the child's work is not held)."""
    try:
        with connect(dsn) as conn:
            row = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'rss'").fetchone()
            return int(row[0]) if row else 0
    except Exception:  # a sample missed is not a failed run
        return -1


def _stored_tokens(dsn: str) -> tuple[int, int]:
    """(chunks, MiniLM word pieces, special tokens left out) of what the run committed."""
    backend = MiniLMBackend()
    chunks = tokens = 0
    with connect(dsn) as conn:
        cur = conn.cursor(name="texts")
        cur.execute("SELECT text FROM ragstore.chunks WHERE family = 'rss'")
        while rows := cur.fetchmany(2000):
            texts = [row[0] for row in rows]
            chunks += len(texts)
            tokens += sum(backend.count_tokens(texts))
    return chunks, tokens


def _folder(args: argparse.Namespace, tmp: str) -> Path:
    """The folder to index: ``--folder`` (built there when empty), else one built in ``tmp``."""
    target = Path(args.folder) if args.folder else Path(tmp) / "docs"
    if target.is_dir() and any(target.iterdir()):
        files = sum(1 for p in target.rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        print(json.dumps({"folder": str(target), "folder_files": files, "folder_bytes_mb": round(size / 1e6, 1)}))
        return target
    files, size = build_folder(target, args.build_folder)
    print(json.dumps({"folder": str(target), "folder_files": files, "folder_text_mb": round(size / 1e6, 1)}))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=None, help="what to index: a JSONL file or a folder")
    parser.add_argument("--build-folder", type=float, default=0, metavar="MB", help="index MB of local docs")
    parser.add_argument("--folder", default=None, help="build the --build-folder folder here (kept, reused)")
    parser.add_argument("--backend", choices=("minilm", "offline"), default="minilm")
    parser.add_argument("--minutes", type=float, default=0, help="stop the run after M minutes (0: run whole)")
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--limit", type=int, default=0, help="index the first N JSONL lines only (0: all)")
    parser.add_argument("--batch-size", type=int, default=0, help="ragstore index --batch-size (0: its default)")
    args = parser.parse_args()
    if not args.dataset and not args.build_folder:
        parser.error("give --dataset or --build-folder")
    source = Path(args.dataset or "")
    with tempfile.TemporaryDirectory() as tmp, admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        if args.build_folder:
            source = _folder(args, tmp)
        if args.limit and source.is_file():
            cut = Path(tmp) / "corpus.jsonl"
            with source.open(encoding="utf-8") as lines, cut.open("w", encoding="utf-8") as out:
                for n, line in enumerate(lines):
                    if n == args.limit:
                        break
                    out.write(line)
            source = cut
        with connect(dsn) as conn:
            families.create_family(conn, "rss", MiniLMBackend() if args.backend == "minilm" else OfflineBackend())
        print("before:", _uptime(), flush=True)
        command = [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, "index", "rss", str(source), "--no-progress"]
        if args.batch_size:
            command += ["--batch-size", str(args.batch_size)]
        if args.build_folder:
            command += ["--skip-bad-files"]
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak = minute_peak = 0
        minute = 1
        stopped = False
        while child.poll() is None:
            rss = _rss_kb(child.pid)
            peak, minute_peak = max(peak, rss), max(minute_peak, rss)
            elapsed = time.perf_counter() - started
            if elapsed >= minute * 60:
                line = {"minute": minute, "peak_rss_mb": round(minute_peak / 1024, 1), "chunks": _chunks(dsn)}
                print(json.dumps(line), flush=True)
                minute, minute_peak = minute + 1, 0
            if args.minutes and elapsed >= args.minutes * 60 and not stopped:
                child.send_signal(signal.SIGINT)
                stopped = True
            if stopped and elapsed >= args.minutes * 60 + 30:
                child.send_signal(signal.SIGTERM)  # an interrupt the run did not answer in 30 s
            time.sleep(0.2)
        out, err = child.communicate()
        seconds = time.perf_counter() - started
        print("after:", _uptime())
        if child.returncode != 0 and not stopped:
            sys.exit(f"ragstore index failed: {err.strip()}")
        print(out.strip() or err.strip().splitlines()[-1:])
        result = {
            "dataset": str(args.dataset or f"--build-folder {args.build_folder:g}"),
            "backend": args.backend,
            "peak_rss_mb": round(peak / 1024, 1),
            "seconds": round(seconds, 1),
        }
        if stopped:
            chunks, tokens = _stored_tokens(dsn)
            result |= {"stopped_after_minutes": args.minutes, "chunks_committed": chunks, "tokens_committed": tokens}
        print(json.dumps(result))


if __name__ == "__main__":
    main()
