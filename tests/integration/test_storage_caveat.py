"""Store.create_family gives the caveat `family create` prints where a storage measured badly."""

import warnings

import pytest

from ragstore import StorageCaveatWarning, Store
from ragstore.embed.external import ExternalBackend


def test_bit_storage_warns_with_the_measured_recall_and_vector_does_not(dsn):
    with Store(dsn, pool_size=2) as store:
        with pytest.warns(StorageCaveatWarning, match=r"family b: bit storage measured recall@10 0\.34"):
            store.create_family("b", ExternalBackend("mine", 8), options={"dimensions": 8}, storage="bit")
        with warnings.catch_warnings():
            warnings.simplefilter("error", StorageCaveatWarning)
            family = store.create_family("v", ExternalBackend("mine", 8), options={"dimensions": 8})
        assert family.storage == "vector"
        assert store.family("b").storage == "bit"
