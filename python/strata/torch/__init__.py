"""strata.torch: train any torch.nn.Module with its parameters, gradients
and optimizer states in a strata store.

    import strata.torch as st
    store = st.Store(device_budget="4GiB", host_budget="32GiB",
                     nvme_dirs=["/mnt/nvme0"])
    model = st.offload(model, store)      # in place: the same Parameters
    opt = st.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        st.clip_grad_norm_(model, 1.0); opt.step(); opt.zero_grad()
    with st.materialized(model):          # full tensors, e.g. to save
        model.save_pretrained(out)

docs/python.md says what is exact and what is not supported yet.
"""

from strata._core import Store, StrataError
from strata.torch._clip import clip_grad_norm_
from strata.torch._offload import is_offloaded, materialized, offload
from strata.torch._optim import Adam, AdamW
from strata.torch._param import OffloadedParameter

__all__ = [
    "Adam",
    "AdamW",
    "OffloadedParameter",
    "Store",
    "StrataError",
    "clip_grad_norm_",
    "is_offloaded",
    "materialized",
    "offload",
]
