"""strata: a tiered tensor store (GPU memory, pinned host memory, NVMe).

The C++ store through its extension, strata._core:

    import strata
    with strata.Store(device_budget="64MiB", host_budget="256MiB",
                      nvme_dirs=["/var/tmp"]) as store:
        w = store.create("w", shape=[1024, 1024], dtype=strata.DType.FLOAT32)
        lease = store.acquire(w, strata.Tier.DEVICE, strata.Access.OVERWRITE)
        t = torch.from_dlpack(lease)   # zero-copy; the lease ends with t

strata.torch trains a torch.nn.Module with its state in the store.
"""

from strata._core import (
    Access,
    DType,
    InvalidArgumentError,
    Kind,
    Lease,
    Store,
    StrataError,
    Tier,
)

__all__ = [
    "Access",
    "DType",
    "InvalidArgumentError",
    "Kind",
    "Lease",
    "Store",
    "StrataError",
    "Tier",
]
