"""A local Citus cluster (one coordinator, N workers) for tests and demos: ``ragstore cluster``.

Each node is an embedded PostgreSQL (see :mod:`ragstore.db.server`) in ``<home>/cluster/<node>``, run
by the same unprivileged user, with ``shared_preload_libraries = 'citus'``.

Access: no node listens on TCP. Clients and the nodes themselves reach a node through its Unix socket,
in a 0700 folder of the server's user, with ``trust``, as the single embedded server does: only that
user (and root) can reach the sockets, so the cluster is as private as one node, and no password exists
to keep. Citus opens libpq connections between the nodes (as the coordinator's current role): each node
is registered under its socket folder as its host name (libpq reads a host name starting with ``/`` as
a socket folder), and ``citus.local_hostname`` names a node's own folder for its connections to itself.
The DSN printed by ``cluster start --json`` is the coordinator's socket and carries no password.

Roles: Citus connects to the workers as the current role, which is a NOLOGIN group role after ``SET
ROLE ragstore_app`` or inside the bulk-load functions (SECURITY DEFINER, owned by ``ragstore_owner``).
``start`` makes the three group roles on the coordinator (NOLOGIN, as ragstore migrate would) and gives
them LOGIN on the workers only (``ragstore/sql/cluster.sql``): on the coordinator, where clients log in,
they stay NOLOGIN.

Citus must be built into the embedded PostgreSQL first: ``scripts/build_citus.sh``.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

import psycopg

from ragstore.db.server import DATABASE, EmbeddedServer, _bin, _is_root, _server_user, memory_settings
from ragstore.db.sqlfiles import query
from ragstore.errors import DatabaseUnavailable, InvalidInput

_NODE_SETTINGS = """\
# written by ragstore at every start: a node of the local Citus cluster
listen_addresses = ''
port = {port}
unix_socket_directories = '{socket_dir}'
unix_socket_permissions = 0700
shared_preload_libraries = 'citus'
citus.local_hostname = '{socket_dir}'
citus.node_conninfo = 'sslmode=disable'
max_connections = 200
max_prepared_transactions = 200
wal_level = logical
shared_buffers = '{shared_buffers}'
work_mem = '16MB'
maintenance_work_mem = '{maintenance_work_mem}'
max_wal_size = '2GB'
jit = off
"""
# The socket folder is 0700 (only the server's user and root reach it); no TCP at all (the node does not
# listen on it, and would refuse it).
_NODE_HBA = """\
# written by ragstore at every start
local   all   all                     trust
host    all   all   0.0.0.0/0         reject
host    all   all   ::/0              reject
"""
MAX_WORKERS = 16


def citus_available() -> bool:
    """Whether citus.so is installed in the embedded PostgreSQL (``scripts/build_citus.sh``)."""
    from subprocess import run

    try:
        out = run([str(_bin("pg_config")), "--pkglibdir"], capture_output=True, text=True, check=True).stdout
    except (OSError, Exception):
        return False
    return (Path(out.strip()) / "citus.so").exists()


BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_citus.sh"


def build_citus() -> None:
    """Install Citus into the embedded PostgreSQL with ``scripts/build_citus.sh`` of this source checkout
    (copied from the per-machine cache in seconds, else compiled in minutes). DatabaseUnavailable, in one
    line, when there is no checkout (an installed package) or the build fails."""
    import subprocess
    import sys

    if not BUILD_SCRIPT.exists():
        raise DatabaseUnavailable(
            "Citus is not installed in the embedded PostgreSQL: run scripts/build_citus.sh of a ragstore "
            "checkout, or point --dsn at your own Citus"
        )
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True
    )
    if done.returncode != 0 or not citus_available():
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise DatabaseUnavailable(f"building Citus failed: {lines[-1] if lines else f'exit {done.returncode}'}")


class ClusterNode(EmbeddedServer):
    """One node: an embedded server on its own port number (its socket's name), registered in Citus under
    its socket folder."""

    def __init__(self, home: Path, port: int) -> None:
        super().__init__(home)
        self.port = port

    @property
    def host(self) -> str:
        """The node's name in Citus' metadata: its socket folder (libpq connects through the socket)."""
        return str(self.socket_dir)

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def _settings_texts(self) -> tuple[str, str]:
        return _NODE_SETTINGS.format(port=self.port, socket_dir=self.socket_dir, **memory_settings()), _NODE_HBA


@dataclass(frozen=True)
class NodeStatus:
    name: str
    port: int
    socket_dir: str
    running: bool
    pid: int | None


@dataclass(frozen=True)
class ClusterStatus:
    home: Path
    created: bool
    nodes: tuple[NodeStatus, ...]
    dsn: str | None

    @property
    def running(self) -> bool:
        return bool(self.nodes) and all(node.running for node in self.nodes)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable and writable by its owner only (the node ports are nobody
    else's business), whatever the umask and whatever mode an earlier file had."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalCluster:
    """The cluster of a ragstore home: ``<home>/cluster``."""

    def __init__(self, home: Path) -> None:
        self.root = home / "cluster"
        self.layout_file = self.root / "cluster.json"

    # -- layout --------------------------------------------------------------------------------
    def _layout(self) -> dict[str, int] | None:
        try:
            data = json.loads(self.layout_file.read_text())
            if stat.S_IMODE(self.layout_file.stat().st_mode) & 0o077:  # written by an earlier version
                self.layout_file.chmod(0o600)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise DatabaseUnavailable(f"cluster: {self.layout_file} is unreadable ({exc}); remove the folder") from exc
        return {str(name): int(port) for name, port in data["ports"].items()}

    def nodes(self) -> list[ClusterNode]:
        layout = self._layout() or {}
        return [ClusterNode(self.root / name, port) for name, port in layout.items()]

    def coordinator(self) -> ClusterNode:
        nodes = self.nodes()
        if not nodes:
            raise DatabaseUnavailable("no local cluster here: run `ragstore cluster start --workers 2`")
        return nodes[0]

    def _create_layout(self, workers: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)
        ports = {"coordinator": _free_port()}
        for i in range(1, workers + 1):
            port = _free_port()
            while port in ports.values():
                port = _free_port()
            ports[f"worker{i}"] = port
        if _is_root():
            entry = _server_user()
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        _write_private(self.layout_file, json.dumps({"ports": ports}, indent=2) + "\n")

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, workers: int = 2) -> str:
        """Start (creating on first use) the coordinator and its workers; return the coordinator's DSN.

        A cluster created with another number of workers is refused (stop it and remove its folder).
        Citus is installed into the embedded PostgreSQL first when missing (:func:`build_citus`).
        """
        if not 1 <= workers <= MAX_WORKERS:
            raise InvalidInput(f"--workers {workers}: choose 1 to {MAX_WORKERS}")
        if not citus_available():
            build_citus()
        layout = self._layout()
        if layout is None:
            self._create_layout(workers)
        elif len(layout) - 1 != workers:
            raise InvalidInput(
                f"the cluster in {self.root} has {len(layout) - 1} workers, not {workers}: "
                "`ragstore cluster stop`, remove that folder, and start again"
            )
        nodes = self.nodes()
        # Every node up first: a statement on the coordinator may reach the workers.
        for node in nodes:
            node.ensure_running()
        for node in nodes:
            with psycopg.connect(node.dsn(), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
        coordinator, workers_ = nodes[0], nodes[1:]
        with psycopg.connect(coordinator.dsn(), autocommit=True) as conn:
            known = {int(port): str(name) for _nodeid, name, port in conn.execute(query("cluster", "workers"))}
            if any(not name.startswith("/") for name in known.values()):
                raise InvalidInput(
                    f"the cluster in {self.root} was made by an older ragstore (its nodes talk over TCP): "
                    "`ragstore cluster stop`, remove that folder, and start again"
                )
            conn.execute(query("cluster", "set_coordinator"), {"host": coordinator.host, "port": coordinator.port})
            for worker in workers_:
                if worker.port not in known:
                    conn.execute(query("cluster", "add_worker"), {"host": worker.host, "port": worker.port})
            conn.execute(query("cluster", "group_roles"))
        for worker in workers_:
            with psycopg.connect(worker.dsn(), autocommit=True) as conn:
                conn.execute(query("cluster", "worker_role_logins"))  # several statements, no parameters
        return coordinator.dsn()

    def stop(self) -> bool:
        """Stop every node (workers first); False when none was running."""
        stopped = False
        for node in reversed(self.nodes()):
            stopped = node.stop() or stopped
        return stopped

    def status(self) -> ClusterStatus:
        nodes = tuple(
            NodeStatus(
                name=node.home.name,
                port=node.port,
                socket_dir=node.host,
                running=(pid := node.running_pid()) is not None,
                pid=pid,
            )
            for node in self.nodes()
        )
        running = bool(nodes) and all(n.running for n in nodes)
        return ClusterStatus(
            home=self.root,
            created=bool(nodes),
            nodes=nodes,
            dsn=self.coordinator().dsn() if running else None,
        )
