"""Fixtures for the strata package's tests: small stores in a private
directory (pytest's tmp_path), on whatever device the machine has (the
simulated one here)."""

import pytest

import strata


@pytest.fixture
def make_store(tmp_path):
    """make_store(**options) opens a store with NVMe in tmp_path and 64 KiB
    blocks; every store it made is closed at the end of the test."""
    stores = []

    def make(**options):
        options.setdefault("nvme_dirs", [str(tmp_path)])
        options.setdefault("nvme_budget", "16MiB")
        options.setdefault("block_size", "64KiB")
        store = strata.Store(**options)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()
