"""``ragstore cluster``: a local Citus cluster (coordinator + workers) for tests and demos."""

from __future__ import annotations

import click

from ragstore import config
from ragstore.cli.main import echo_stopped, emit_json
from ragstore.common.fields import fields_dict
from ragstore.db.cluster import LocalCluster, citus_available


@click.group("cluster")
def cluster_group() -> None:
    """A local Citus cluster (a coordinator and workers over Unix sockets) for tests and demos."""


def _cluster() -> LocalCluster:
    return LocalCluster(config.home_dir())


@cluster_group.command("start")
@click.option("--workers", type=click.IntRange(1, 16), default=2, show_default=True, help="Number of workers.")
@click.option("--json", "as_json", is_flag=True, help="Print the coordinator's DSN as JSON.")
def cluster_start(workers: int, as_json: bool) -> None:
    """Start the coordinator and its workers (created on first use); print the coordinator's DSN.

    Builds Citus into the embedded PostgreSQL first when it is missing (scripts/build_citus.sh: a copy from
    the per-machine cache, or minutes of compiling)."""
    if not citus_available():
        click.echo("installing Citus into the embedded PostgreSQL (once per machine)...", err=True)
    dsn = _cluster().start(workers)
    if as_json:
        emit_json({"dsn": dsn, "workers": workers})
    else:
        click.echo(f"citus cluster running ({workers} workers): {dsn}")
        click.echo(f"use it with: export RAGSTORE_DSN='{dsn}'")


@cluster_group.command("status")
@click.option("--json", "as_json", is_flag=True)
def cluster_status(as_json: bool) -> None:
    """Show the nodes of the local cluster and whether each runs."""
    st = _cluster().status()
    data = fields_dict(st, home=str(st.home), nodes=[fields_dict(node) for node in st.nodes])
    data["running"] = st.running
    if as_json:
        emit_json(data)
        return
    if not st.created:
        click.echo(f"no cluster in {st.home}: run `ragstore cluster start --workers 2`")
        return
    for n in st.nodes:
        state = f"running (pid {n.pid})" if n.running else "stopped"
        click.echo(f"{n.name}: {n.socket_dir} port {n.port} {state}")
    if st.dsn:
        click.echo(f"dsn: {st.dsn}")


@cluster_group.command("stop")
def cluster_stop() -> None:
    """Stop every node of the local cluster (data is kept)."""
    echo_stopped("citus cluster", _cluster().stop())
