"""A local Citus cluster (one coordinator, N workers) for tests and demos: ``ragstore cluster``.

Each node is an embedded PostgreSQL (see :mod:`ragstore.db.server`) in ``<home>/cluster/<node>``, run
by the same unprivileged user, with ``shared_preload_libraries = 'citus'``. The nodes talk to each other
over TCP on 127.0.0.1 only (Citus opens libpq connections between nodes; a Unix socket is not enough for
a worker to reach the coordinator's metadata under the name it was registered with).

Access:
- clients reach the coordinator through its Unix socket, in a 0700 folder of the server's user, with
  ``trust`` as the embedded server does: the DSN printed by ``cluster start --json`` is that socket and
  carries no password;
- TCP is admitted from 127.0.0.1 only and needs ``scram-sha-256``: the cluster's password is random,
  written once to ``<home>/cluster/pgpass`` (0600, the server's user); the nodes read it through
  ``PGPASSFILE`` for their connections to each other. ``trust`` on 127.0.0.1 would let every local
  user in, and ``peer`` does not exist for TCP, so scram with a private password file is the choice that
  keeps the cluster as private as the single embedded server.

Citus must be built into the embedded PostgreSQL first: ``scripts/build_citus.sh``.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

import psycopg

from ragstore.db.server import (
    DATABASE,
    EmbeddedServer,
    _bin,
    _is_root,
    _server_user,
    memory_settings,
    write_settings,
)
from ragstore.errors import DatabaseUnavailable, InvalidInput

_NODE_SETTINGS = """\
# written by ragstore at every start: a node of the local Citus cluster
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
unix_socket_permissions = 0700
shared_preload_libraries = 'citus'
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
# The socket folder is 0700 (only the server's user and root reach it); TCP from 127.0.0.1 needs the
# cluster's password; every other address is refused.
_NODE_HBA = """\
# written by ragstore at every start
local   all   all                     trust
host    all   all   127.0.0.1/32      scram-sha-256
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


class ClusterNode(EmbeddedServer):
    """One node: an embedded server on its own port, listening on 127.0.0.1 too."""

    def __init__(self, home: Path, port: int, pgpass: Path) -> None:
        super().__init__(home)
        self.port = port
        self.pgpass = pgpass

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def _child_env(self) -> dict[str, str] | None:
        env = dict(os.environ)
        env["PGPASSFILE"] = str(self.pgpass)
        return env

    def _write_settings(self) -> None:
        settings = _NODE_SETTINGS.format(port=self.port, socket_dir=self.socket_dir, **memory_settings())
        write_settings(self.data_dir, settings, _NODE_HBA)


@dataclass(frozen=True)
class NodeStatus:
    name: str
    port: int
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalCluster:
    """The cluster of a ragstore home: ``<home>/cluster``."""

    def __init__(self, home: Path) -> None:
        self.root = home / "cluster"
        self.layout_file = self.root / "cluster.json"
        self.pgpass = self.root / "pgpass"

    # -- layout --------------------------------------------------------------------------------
    def _layout(self) -> dict[str, int] | None:
        try:
            data = json.loads(self.layout_file.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise DatabaseUnavailable(f"cluster: {self.layout_file} is unreadable ({exc}); remove the folder") from exc
        return {str(name): int(port) for name, port in data["ports"].items()}

    def nodes(self) -> list[ClusterNode]:
        layout = self._layout() or {}
        return [ClusterNode(self.root / name, port, self.pgpass) for name, port in layout.items()]

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
        password = secrets.token_urlsafe(24)
        # The password file: one line for every node, read by libpq in the nodes (PGPASSFILE).
        self.pgpass.write_text("".join(f"127.0.0.1:{port}:*:postgres:{password}\n" for port in ports.values()))
        self.pgpass.chmod(0o600)
        if _is_root():
            entry = _server_user()
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            os.chown(self.pgpass, entry.pw_uid, entry.pw_gid)
        (self.root / "password").write_text(password)
        (self.root / "password").chmod(0o600)
        self.layout_file.write_text(json.dumps({"ports": ports}, indent=2) + "\n")

    def _password(self) -> str:
        return (self.root / "password").read_text().strip()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, workers: int = 2) -> str:
        """Start (creating on first use) the coordinator and its workers; return the coordinator's DSN.

        A cluster created with another number of workers is refused (stop it and remove its folder).
        """
        if not 1 <= workers <= MAX_WORKERS:
            raise InvalidInput(f"--workers {workers}: choose 1 to {MAX_WORKERS}")
        if not citus_available():
            raise DatabaseUnavailable(
                "Citus is not installed in the embedded PostgreSQL: run scripts/build_citus.sh first"
            )
        layout = self._layout()
        if layout is None:
            self._create_layout(workers)
        elif len(layout) - 1 != workers:
            raise InvalidInput(
                f"the cluster in {self.root} has {len(layout) - 1} workers, not {workers}: "
                "`ragstore cluster stop`, remove that folder, and start again"
            )
        password = self._password()
        nodes = self.nodes()
        # Every node up first: a statement on the coordinator may reach the workers.
        for node in nodes:
            node.ensure_running()
        for node in nodes:
            with psycopg.connect(node.dsn(), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
                # Each node's own password entry (the same password everywhere), not sent to the others.
                conn.execute("SET citus.enable_alter_role_propagation = off")
                conn.execute(psycopg.sql.SQL("ALTER ROLE postgres PASSWORD {}").format(psycopg.sql.Literal(password)))
        coordinator, workers_ = nodes[0], nodes[1:]
        with psycopg.connect(coordinator.dsn(), autocommit=True) as conn:
            conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (coordinator.port,))
            known = {
                int(row[0]) for row in conn.execute("SELECT nodeport FROM pg_dist_node WHERE groupid <> 0").fetchall()
            }
            for worker in workers_:
                if worker.port not in known:
                    conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (worker.port,))
        return coordinator.dsn()

    def stop(self) -> bool:
        """Stop every node (workers first); False when none was running."""
        stopped = False
        for node in reversed(self.nodes()):
            stopped = node.stop() or stopped
        return stopped

    def status(self) -> ClusterStatus:
        nodes = tuple(
            NodeStatus(name=node.home.name, port=node.port, running=(pid := node.running_pid()) is not None, pid=pid)
            for node in self.nodes()
        )
        running = bool(nodes) and all(n.running for n in nodes)
        return ClusterStatus(
            home=self.root,
            created=bool(nodes),
            nodes=nodes,
            dsn=self.coordinator().dsn() if running else None,
        )
