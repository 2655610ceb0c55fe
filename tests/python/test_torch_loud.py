"""strata.torch fails loudly: the failures users of other offload systems
report (a parameter read as an empty tensor, clipping that does nothing, a
model that stops learning, a plain optimizer that silently updates nothing)
are errors or correct results here."""

import copy
import pickle

import pytest
import torch

import strata.torch as st
from torch_models import DEVICE, MODELS, batches, state_bytes


@pytest.fixture
def offloaded(make_store):
    """(plain, offloaded, store): two equal GPT-2s, one offloaded at a
    device budget under a quarter of its state."""
    plain, model = MODELS["gpt2"](), MODELS["gpt2"]()
    total = state_bytes(model)
    store = make_store(device_budget=total // 5, host_budget=total // 2,
                       nvme_budget="64MiB")
    st.offload(model, store)
    return plain, model, store


def step(model, ids):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return loss


def test_a_parameter_touched_outside_forward_raises(offloaded):
    plain, model, _ = offloaded
    w = model.transformer.h[0].attn.c_attn.weight
    assert w.shape == plain.transformer.h[0].attn.c_attn.weight.shape
    assert w.numel() == 64 * 192 and w.dtype == torch.float32
    with pytest.raises(RuntimeError, match="transformer.h.0.attn.c_attn.weight is offloaded"):
        w.sum()
    with pytest.raises(RuntimeError, match="materialized"):
        w.data
    with pytest.raises(RuntimeError, match="offloaded"):
        w * 2
    with pytest.raises(RuntimeError, match="offloaded"):
        model.state_dict()
    with pytest.raises(RuntimeError, match="offloaded"):
        copy.deepcopy(w)
    assert "in the store" in repr(w)


def test_inside_materialized_a_parameter_has_its_full_value(offloaded):
    plain, model, _ = offloaded
    with st.materialized(model):
        theirs = plain.state_dict()
        ours = model.state_dict()
        assert ours.keys() == theirs.keys()
        for key in theirs:
            assert torch.equal(ours[key], theirs[key].cpu()), key
        w = model.transformer.wte.weight
        assert w.numel() == w.data.numel() == 256 * 64
        assert type(copy.deepcopy(w)) is torch.nn.Parameter
        assert torch.equal(pickle.loads(pickle.dumps(w)),
                           theirs["transformer.wte.weight"].cpu())


def test_materialized_writes_back_only_when_writable(offloaded):
    _, model, _ = offloaded
    wpe = model.transformer.wpe.weight
    with st.materialized(model):
        before = wpe.detach().clone()
        wpe.data.fill_(1.0)
    with st.materialized(model):
        assert torch.equal(wpe, before)  # a copy, dropped
    with st.materialized(model, writable=True):
        wpe.data.fill_(1.0)
    with st.materialized(model):
        assert bool((wpe == 1.0).all())


def test_bad_models_are_refused(make_store):
    store = make_store()
    with pytest.raises(TypeError, match="torch.nn.Module"):
        st.offload(torch.zeros(3), store)
    model = MODELS["mlp"]()
    st.offload(model, store)
    with pytest.raises(ValueError, match="already offloaded"):
        st.offload(model, store)
    sharing = torch.nn.Linear(3, 3)
    sharing.weight = model.layers[0].weight
    with pytest.raises(ValueError, match="already offloaded"):
        st.offload(sharing, store)
    with pytest.raises(ValueError, match="float64"):
        st.offload(torch.nn.Linear(3, 3).double(), store)
    with pytest.raises(ValueError, match="fp32"):
        st.AdamW(torch.nn.Linear(3, 3).half().parameters())
    with pytest.raises(ValueError, match="betas"):
        st.Adam(MODELS["mlp"]().parameters(), betas=(1.0, 0.9))


def test_a_plain_optimizer_on_an_offloaded_model_raises(offloaded):
    _, model, _ = offloaded
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step(model, batches(1, 1)[0][0])
    with pytest.raises(RuntimeError, match="offloaded"):
        opt.step()


def test_clipping_without_gradients_raises(offloaded):
    _, model, _ = offloaded
    with pytest.raises(RuntimeError, match="no parameter has a gradient"):
        st.clip_grad_norm_(model, 1.0)


def test_torch_clipping_acts_on_offloaded_gradients(make_store):
    # torch's own clip_grad_norm_ reads .grad: on an offloaded parameter
    # that is the store's gradient, so it clips (torchtitan #990 is the bug
    # where it silently did nothing).
    a, b = MODELS["gpt2"](), MODELS["gpt2"]()
    total = state_bytes(a)
    ids = batches(1, 1)[0][0]
    results = []
    for model in (a, b):
        st.offload(model, make_store(device_budget=total // 5,
                                     host_budget=total, nvme_budget="64MiB"))
        step(model, ids)
    norm_theirs = torch.nn.utils.clip_grad_norm_(a.parameters(), 0.1)
    norm_ours = st.clip_grad_norm_(b, 0.1)
    assert norm_theirs.item() == pytest.approx(norm_ours.item(), rel=1e-6)
    assert norm_ours.item() > 0.1
    for model in (a, b):
        clipped = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        results.append(clipped.item())
    assert results[0] == pytest.approx(0.1, rel=1e-4)
    assert results[1] == pytest.approx(0.1, rel=1e-4)


def test_module_zero_grad_acts_on_offloaded_gradients(offloaded):
    _, model, store = offloaded
    wte = model.transformer.wte.weight
    step(model, batches(1, 1)[0][0])
    assert wte.grad is not None and bool(wte.grad.abs().sum() > 0)
    model.zero_grad(set_to_none=False)  # zeroed in the store
    assert wte.grad is not None and not bool(wte.grad.abs().sum() > 0)
    model.zero_grad(set_to_none=True)  # discarded in the store
    assert wte.grad is None
    with pytest.raises(RuntimeError, match="no parameter has a gradient"):
        st.clip_grad_norm_(model, 1.0)


def test_leases_stay_within_the_budget_and_none_outlive_backward(
        offloaded, monkeypatch):
    # Device bytes under lease, read as each parameter is acquired for a
    # module's forward and as backward re-acquires each saved weight.
    _, model, store = offloaded
    budget = store.stats()["tiers"]["device"]["capacity_bytes"]
    forward, backward = [], []

    def leased():
        return store.stats()["tiers"]["device"]["leased_bytes"]

    materialize = st._param.ParamRecord.materialize

    def counted_materialize(rec):
        materialize(rec)
        forward.append(leased())

    monkeypatch.setattr(st._param.ParamRecord, "materialize", counted_materialize)
    state = st._offload.state_of(model)
    unpack = state.unpack

    def counted_unpack(*args):
        t = unpack(*args)
        backward.append(leased())
        return t

    monkeypatch.setattr(state, "unpack", counted_unpack)
    step(model, batches(1, 1)[0][0])
    assert len(forward) > 20 and max(forward) > 0
    assert len(backward) > 10 and max(backward) > 0
    assert max(forward + backward) <= budget
    for tier in ("device", "host", "nvme"):
        assert store.stats()["tiers"][tier]["leased_bytes"] == 0, tier
    assert all(store.residency(r.id)["leases"] == 0
               for r in st._offload.state_of(model).records)


def test_a_submodule_called_alone_saves_handles_too(offloaded):
    # A block called by itself is the outermost offloaded forward: its
    # saved weights are handles, its leases end with its forward.
    plain, model, store = offloaded
    x = torch.randn(2, 8, 64, device=DEVICE, requires_grad=True)
    y = model.transformer.h[1](x)[0].sum()
    assert store.stats()["tiers"]["device"]["leased_bytes"] == 0
    y.backward()
    x_plain = x.detach().clone().requires_grad_()
    plain.transformer.h[1](x_plain)[0].sum().backward()
    assert torch.equal(x.grad, x_plain.grad)


def test_a_forward_that_raises_leaves_no_lease(offloaded):
    _, model, store = offloaded
    with pytest.raises(Exception):
        model(input_ids=torch.full((1, 8), 10_000, device=DEVICE))  # past the vocabulary
    assert store.stats()["tiers"]["device"]["leased_bytes"] == 0
    step(model, batches(1, 1)[0][0])  # and the model still trains


def test_the_loss_falls(make_store):
    # accelerate #3770: offloaded training that silently stops learning.
    # A repeated sequence is learnable in a few dozen steps.
    model = MODELS["gpt2"]()
    total = state_bytes(model)
    st.offload(model, make_store(device_budget=total // 5,
                                 host_budget=total // 2, nvme_budget="64MiB"))
    opt = st.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    ids = (torch.arange(32).repeat(2, 1) * 7 % 256).to(DEVICE)
    losses = []
    for _ in range(30):
        losses.append(step(model, ids).item())
        st.clip_grad_norm_(model, 1.0)
        opt.step()
        opt.zero_grad()
    assert losses[-1] < 0.2 * losses[0], losses
