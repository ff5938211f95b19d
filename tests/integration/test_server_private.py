"""The embedded server is private to the user who owns its home, and sized from the machine.

Checked from outside, as another local user would try: folder and socket modes, who can connect, the
postmaster's groups, what ``COPY ... FROM PROGRAM`` runs as, and the memory settings a start writes.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from ragstore.cli.main import cli
from ragstore.db import server as server_mod
from ragstore.db.server import EmbeddedServer
from ragstore.errors import DatabaseUnavailable, InvalidInput

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="acting as other local users needs root")
NOBODY = pwd.getpwnam("nobody")
DAEMON = pwd.getpwnam("daemon")


def _intrude(dsn: str, home: Path, data: Path) -> str:
    """What another local user reaches: connect to the socket, list the home, read a data file."""
    reached = []
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
        reached.append("connected")
    except psycopg.Error:
        pass
    for probe in (lambda: os.listdir(home), lambda: (data / "PG_VERSION").read_text()):
        try:
            probe()
            reached.append("read")
        except OSError:
            pass
    return ",".join(reached) or "refused"


def _as_user(user: pwd.struct_passwd, work: Callable[[], str]) -> str:
    """Run ``work`` in a forked child that has become ``user`` (own group, no supplementary groups)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            answer = work()
        except BaseException as exc:
            answer, code = f"{type(exc).__name__}: {exc}", 1
        finally:
            os.write(write_end, answer.encode())
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, answer
    return answer


def _open_parents(path: Path) -> None:
    """o+x on every parent, as a shared machine's /home or /tmp would have: only the modes ragstore sets
    may keep others out."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        parent.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    own = EmbeddedServer(Path(tmp_path_factory.mktemp("private-pg")))
    own.ensure_running()
    try:
        yield own
    finally:
        own.stop()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow
def test_home_data_and_socket_folders_are_0700_and_the_socket_private(server: EmbeddedServer) -> None:
    owner = pwd.getpwnam("embedded_postgres").pw_uid if ROOT else os.geteuid()
    for folder in (server.home, server.data_dir, server.socket_dir):
        assert _mode(folder) == 0o700, folder
        assert folder.stat().st_uid == owner, folder
    sock = server.socket_dir / ".s.PGSQL.5432"
    assert stat.S_ISSOCK(sock.stat().st_mode) and _mode(sock) & 0o077 == 0
    assert _mode(server.log_file) & 0o077 == 0


@pytest.mark.slow
def test_pg_hba_admits_the_socket_only(server: EmbeddedServer) -> None:
    lines = [
        line.split()
        for line in (server.data_dir / "pg_hba.conf").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines and all(fields[0] in ("local", "host") for fields in lines)
    assert all(fields[-1] == "reject" for fields in lines if fields[0] == "host"), lines
    with psycopg.connect(server.dsn("postgres")) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
        assert conn.execute("SHOW unix_socket_permissions").fetchone() == ("0700",)


@needs_root
def test_another_local_user_cannot_connect_nor_read(server: EmbeddedServer) -> None:
    _open_parents(server.home)
    assert _as_user(NOBODY, lambda: _intrude(server.dsn("postgres"), server.home, server.data_dir)) == "refused"


@needs_root
def test_the_postmaster_runs_with_its_own_group_and_no_supplementary_groups(server: EmbeddedServer) -> None:
    pid = server.running_pid()
    assert pid is not None
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    gids = {int(g) for g in status["Gid"].split()}
    assert gids == {pwd.getpwnam("embedded_postgres").pw_gid} and 0 not in gids
    assert status["Groups"].split() == []


@needs_root
def test_copy_from_program_runs_without_root_groups(server: EmbeddedServer, tmp_path: Path) -> None:
    secret = tmp_path / "root-group-secret"
    secret.write_text("only root's group may read this\n")
    os.chown(secret, 0, 0)
    secret.chmod(0o640)
    _open_parents(secret)
    with psycopg.connect(server.dsn("postgres"), autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE out (line text)")
        conn.execute("COPY out FROM PROGRAM 'id'")
        ident = conn.execute("SELECT string_agg(line, ' ') FROM out").fetchone()
        assert ident is not None
        assert "gid=0(" not in ident[0] and "(root)" not in ident[0], ident
        with pytest.raises(psycopg.Error):
            conn.execute(f"COPY out FROM PROGRAM 'cat {secret}'")


@needs_root
def test_an_existing_open_home_is_made_private_on_its_next_start(server: EmbeddedServer) -> None:
    server.stop()
    server.home.chmod(0o755)
    server.data_dir.chmod(0o750)
    server.socket_dir.chmod(0o777)
    (server.data_dir / "pg_hba.conf").write_text("local all all trust\nhost all all 0.0.0.0/0 trust\n")
    server.ensure_running()
    for folder in (server.home, server.data_dir, server.socket_dir):
        assert _mode(folder) == 0o700, folder
    assert "trust" not in [
        line.split()[-1]
        for line in (server.data_dir / "pg_hba.conf").read_text().splitlines()
        if line.startswith("host")
    ]


@needs_root
def test_a_running_server_of_an_open_home_is_closed_by_the_next_command(server: EmbeddedServer) -> None:
    server.socket_dir.chmod(0o777)
    server.home.chmod(0o755)
    server.ensure_running()
    assert _mode(server.socket_dir) == 0o700 and _mode(server.home) == 0o700


@pytest.mark.slow
@needs_root
def test_a_server_started_by_a_non_root_user_is_private_to_that_user(tmp_path: Path) -> None:
    home = tmp_path / "nobody-home"
    home.mkdir()
    os.chown(home, NOBODY.pw_uid, NOBODY.pw_gid)
    _open_parents(home)
    server = EmbeddedServer(home)
    dsn = _as_user(NOBODY, server.ensure_running)
    try:
        for folder in (server.home, server.data_dir, server.socket_dir):
            assert _mode(folder) == 0o700 and folder.stat().st_uid == NOBODY.pw_uid, folder
        assert _as_user(NOBODY, lambda: _intrude(dsn, home, server.data_dir)) == "connected,read,read"
        assert _as_user(DAEMON, lambda: _intrude(dsn, home, server.data_dir)) == "refused"
    finally:
        _as_user(NOBODY, lambda: str(server.stop()))


def _long_home(tmp_path: Path) -> Path:
    home = tmp_path / ("h" * 60) / ("o" * 60)
    assert EmbeddedServer(home).socket_dir.parent == Path(tempfile.gettempdir())
    return home


@pytest.mark.slow
def test_a_socket_folder_in_tmp_is_private_too(tmp_path: Path) -> None:
    server = EmbeddedServer(_long_home(tmp_path))
    server.ensure_running()
    try:
        owner = pwd.getpwnam("embedded_postgres").pw_uid if ROOT else os.geteuid()
        info = server.socket_dir.lstat()
        assert stat.S_ISDIR(info.st_mode) and _mode(server.socket_dir) == 0o700 and info.st_uid == owner
        with psycopg.connect(server.dsn("postgres")) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.stop()
        shutil.rmtree(server.socket_dir, ignore_errors=True)


def test_a_planted_link_at_the_socket_folder_is_refused(tmp_path: Path) -> None:
    server = EmbeddedServer(_long_home(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server.socket_dir.symlink_to(elsewhere)
    try:
        with pytest.raises(DatabaseUnavailable, match="is not a folder"):
            server.ensure_running()
        assert server.running_pid() is None
    finally:
        server.socket_dir.unlink()


# -- memory ------------------------------------------------------------------------------------------
GB = 1024**3


@pytest.mark.parametrize(
    ("ram", "shared_buffers", "maintenance"),
    [(1 * GB, "131072kB", "65536kB"), (4 * GB, "262144kB", "262144kB"), (64 * GB, "1048576kB", "1048576kB")],
)
def test_memory_is_sized_from_the_machine_with_a_floor_and_a_cap(
    monkeypatch: pytest.MonkeyPatch, ram: int, shared_buffers: str, maintenance: str
) -> None:
    monkeypatch.delenv(server_mod.SHARED_BUFFERS_ENV, raising=False)
    monkeypatch.delenv(server_mod.MAINTENANCE_WORK_MEM_ENV, raising=False)
    monkeypatch.setattr(server_mod, "machine_memory", lambda: ram)
    assert server_mod.memory_settings() == {"shared_buffers": shared_buffers, "maintenance_work_mem": maintenance}


def test_machine_memory_is_the_physical_memory_or_less() -> None:
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < server_mod.machine_memory() <= physical


def test_memory_settings_are_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSTORE_SHARED_BUFFERS", "256mb")
    monkeypatch.setenv("RAGSTORE_MAINTENANCE_WORK_MEM", " 2GB ")
    assert server_mod.memory_settings() == {"shared_buffers": "262144kB", "maintenance_work_mem": "2097152kB"}


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("RAGSTORE_SHARED_BUFFERS", "abc", "RAGSTORE_SHARED_BUFFERS='abc' is not a size"),
        ("RAGSTORE_SHARED_BUFFERS", "512", "is not a size"),
        ("RAGSTORE_SHARED_BUFFERS", "1MB", "below the minimum of 16MB"),
        ("RAGSTORE_MAINTENANCE_WORK_MEM", "-5MB", "RAGSTORE_MAINTENANCE_WORK_MEM='-5MB' is not a size"),
    ],
)
def test_bad_memory_settings_are_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, message: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(InvalidInput, match=message):
        server_mod.memory_settings()


@pytest.mark.slow
def test_a_bad_memory_setting_is_one_line_from_the_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAGSTORE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RAGSTORE_DSN", raising=False)
    monkeypatch.setenv("RAGSTORE_SHARED_BUFFERS", "lots")
    result = CliRunner().invoke(cli, ["server", "start"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: RAGSTORE_SHARED_BUFFERS='lots' is not a size: use a number and a unit, e.g. 256MB or 2GB"
    ]


def test_a_changed_setting_is_picked_up_on_restart(server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSTORE_SHARED_BUFFERS", "48MB")
    monkeypatch.setenv("RAGSTORE_MAINTENANCE_WORK_MEM", "96MB")
    server.stop()
    server.ensure_running()
    with psycopg.connect(server.dsn("postgres")) as conn:
        assert conn.execute("SHOW shared_buffers").fetchone() == ("48MB",)
        assert conn.execute("SHOW maintenance_work_mem").fetchone() == ("96MB",)
    monkeypatch.delenv("RAGSTORE_SHARED_BUFFERS")
    monkeypatch.delenv("RAGSTORE_MAINTENANCE_WORK_MEM")
    server.stop()
    server.ensure_running()
    expected = server_mod.memory_settings()["shared_buffers"]
    with psycopg.connect(server.dsn("postgres")) as conn:
        shown = conn.execute("SELECT setting::bigint * 8 FROM pg_settings WHERE name = 'shared_buffers'").fetchone()
    assert shown is not None and f"{shown[0]}kB" == expected


def test_a_fresh_embedded_server_runs_with_the_desktop_wal_settings(server: EmbeddedServer) -> None:
    """The settings in effect on the running server, not only in the file it was given."""
    with psycopg.connect(server.dsn("postgres")) as conn:
        shown = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("max_wal_size", "min_wal_size", "wal_compression")
        }
    assert shown == {"max_wal_size": "1GB", "min_wal_size": "80MB", "wal_compression": "off"}
