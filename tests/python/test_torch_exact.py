"""strata.torch is exact: an offloaded model trains to the same bits as the
same model trained plainly with the same optimizer, under budgets that
force eviction to NVMe."""

import pytest
import torch

import strata.torch as st
from torch_models import MODELS, batches, state_bytes


def train(model, opt, data, clip=1.0, scheduler=None):
    """Losses and clip norms of each step: micro-batches accumulated,
    clipping, step, zero_grad."""
    log = []
    for micro in data:
        losses = []
        for ids in micro:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            losses.append(loss.item())
        norm = st.clip_grad_norm_(model, clip).item()
        opt.step()
        opt.zero_grad()
        if scheduler is not None:
            scheduler.step()
        log.append((losses, norm))
    return log


def offloaded_store(make_store, model):
    # Device: a quarter of the state less; host: half: every tier is short.
    total = state_bytes(model)
    return make_store(device_budget=total // 5, host_budget=total // 2,
                      nvme_budget="64MiB")


@pytest.mark.parametrize("activations", [False, True])
@pytest.mark.parametrize("name", ["gpt2", "llama", "mlp"])
def test_offloaded_training_is_bitwise_plain_training(make_store, name,
                                                      activations):
    plain, offloaded = MODELS[name](), MODELS[name]()
    store = offloaded_store(make_store, offloaded)
    st.offload(offloaded, store, activations=activations)
    opts = [st.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95),
                     weight_decay=0.1) for m in (plain, offloaded)]
    data = batches(steps=5, micro=2)
    assert train(plain, opts[0], data) == train(offloaded, opts[1], data)
    stats = store.stats()
    assert stats["links"]["nvme_write"]["bytes"] > 0  # eviction was forced
    assert stats["links"]["nvme_read"]["bytes"] > 0
    slots = st._offload.state_of(offloaded).activations
    if activations:  # activations went through the store, and came back
        assert slots.saved > 0
        assert all(not slot.busy for slot in slots.slots)
    with st.materialized(offloaded):
        named = zip(plain.named_parameters(), offloaded.named_parameters())
        for (name_a, a), (name_b, b) in named:
            assert name_a == name_b
            assert torch.equal(a.cpu(), b), name_a
    for a, b in zip(plain.parameters(), offloaded.parameters()):
        (m_a, v_a), (m_b, v_b) = opts[0].moments(a), opts[1].moments(b)
        assert torch.equal(m_a, m_b) and torch.equal(v_a, v_b)


def test_tied_weights_stay_one_parameter(make_store):
    model = MODELS["gpt2"]()
    head = model.lm_head.weight
    st.offload(model, offloaded_store(make_store, model))
    assert model.lm_head.weight is model.transformer.wte.weight is head
    assert isinstance(head, st.OffloadedParameter)
    assert isinstance(head, torch.nn.Parameter)


def test_an_lr_scheduler_drives_the_optimizer_unchanged(make_store):
    plain, offloaded = MODELS["mlp"](), MODELS["mlp"]()
    st.offload(offloaded, offloaded_store(make_store, offloaded))
    logs = []
    for model in (plain, offloaded):
        opt = st.Adam(model.parameters(), lr=1e-2, weight_decay=0.01)
        assert isinstance(opt, torch.optim.Optimizer)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
        logs.append(train(model, opt, batches(steps=4, micro=1), scheduler=sched))
        assert opt.param_groups[0]["lr"] == pytest.approx(1e-2 / 5)
    assert logs[0] == logs[1]


def test_host_adamw_is_torch_adamw_to_a_millionth():
    # The same gradients into both optimizers each step, 10 steps. strata's
    # kernel rounds differently from torch's (another order of the same
    # operations), so a tolerance, not bits: each parameter's largest
    # difference within 1e-6 of its largest magnitude.
    ours, theirs = MODELS["mlp"](), MODELS["mlp"]()
    opt_ours = st.AdamW(ours.parameters(), lr=1e-3, betas=(0.9, 0.95),
                        weight_decay=0.1)
    opt_theirs = torch.optim.AdamW(theirs.parameters(), lr=1e-3,
                                   betas=(0.9, 0.95), weight_decay=0.1)
    theirs_initial = {id(b): b.detach().clone() for b in theirs.parameters()}
    gen = torch.Generator().manual_seed(3)
    for _ in range(10):
        for a, b in zip(ours.parameters(), theirs.parameters()):
            g = torch.randn(a.shape, generator=gen).to(a.device)
            a.grad, b.grad = g.clone(), g.clone()
        opt_ours.step()
        opt_theirs.step()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        with torch.no_grad():
            error = (a - b).abs().max() / b.abs().max()
        assert error <= 1e-6, error.item()
        assert not torch.equal(a, theirs_initial[id(b)])  # it moved
