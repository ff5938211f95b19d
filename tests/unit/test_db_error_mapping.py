"""psycopg's errors as ragstore's: what the caller does next decides the class."""

import pytest
from psycopg import errors as pgerrors

from ragstore.db.connection import map_db_error
from ragstore.errors import Conflict, DatabaseUnavailable


@pytest.mark.parametrize(
    "error", [pgerrors.DeadlockDetected, pgerrors.SerializationFailure, pgerrors.TransactionRollback]
)
def test_a_rolled_back_transaction_is_a_conflict_to_retry_not_an_outage(error):
    # psycopg derives DeadlockDetected and SerializationFailure from OperationalError, not from
    # TransactionRollback: they must not read as "database unavailable".
    with pytest.raises(Conflict, match="retry") as raised:
        map_db_error(error("deadlock detected"))
    assert not isinstance(raised.value, DatabaseUnavailable)


def test_a_lost_connection_is_still_an_outage():
    with pytest.raises(DatabaseUnavailable):
        map_db_error(pgerrors.AdminShutdown("terminating connection"))
