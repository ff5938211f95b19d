"""The pool options of Store and AsyncStore: defined once (PoolSettings), checked before any connection."""

import pytest

from ragstore import AsyncStore, Store
from ragstore.errors import InvalidInput
from ragstore.store import PoolSettings

# Nothing listens here: a check that let a bad option through would fail on connecting instead.
NOWHERE = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1"


def test_the_defaults_and_the_pool_arguments_they_make():
    settings = PoolSettings()
    assert (settings.pool_size, settings.min_size, settings.timeout, settings.application_name) == (
        10,
        1,
        30.0,
        "ragstore",
    )
    assert PoolSettings(pool_size=3, min_size=0, timeout=2, application_name="app").pool_kwargs() == {
        "min_size": 0,
        "max_size": 3,
        "timeout": 2.0,
        "kwargs": {"autocommit": True, "application_name": "app", "connect_timeout": 10},
    }


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pool_size": 0}, "pool_size must be at least 1, got 0"),
        ({"pool_size": True}, "pool_size must be an integer, got True"),
        ({"pool_size": 2, "min_size": 3}, "min_size must be between 0 and pool_size (2), got 3"),
    ],
)
def test_bad_pool_options_are_refused_before_any_connection(options, message):
    with pytest.raises(InvalidInput) as sync_error:
        Store(NOWHERE, **options)
    assert str(sync_error.value) == message
    with pytest.raises(InvalidInput) as async_error:
        AsyncStore(NOWHERE, **options)
    assert str(async_error.value) == message


@pytest.mark.parametrize("size", [0, -1, 1.5, False])
def test_a_bad_worker_pool_size_is_named(size):
    with pytest.raises(InvalidInput, match=r"^worker_pool_size must be an integer of at least 1, got "):
        AsyncStore(NOWHERE, worker_pool_size=size)


def test_an_unknown_option_is_a_type_error():
    with pytest.raises(TypeError, match="application"):
        Store(NOWHERE, application="x")  # type: ignore[call-arg]
