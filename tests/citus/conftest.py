"""A local Citus cluster (coordinator + 2 workers) shared by the tests of this folder, migrated once.

The cluster needs Citus built into the embedded PostgreSQL (scripts/build_citus.sh, which .ci/run calls
before the tests); without it every test here is skipped with that reason.
"""

from collections.abc import Iterator

import pytest

from ragstore import migrate
from ragstore.db.cluster import LocalCluster, citus_available


@pytest.fixture(scope="session")
def citus_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if not citus_available():
        pytest.skip("Citus is not built into the embedded PostgreSQL: run scripts/build_citus.sh")
    cluster = LocalCluster(tmp_path_factory.mktemp("citus-home"))
    cluster.start(2)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def citus_dsn(citus_cluster: LocalCluster) -> str:
    dsn = citus_cluster.coordinator().dsn()
    migrate.upgrade(dsn)
    return dsn
