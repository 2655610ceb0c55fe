"""st.offload(..., activations=True): autograd's saved activations in the
store, exact, one store tensor per save position reused step after step."""

import torch

import strata.torch as st
from torch_models import MODELS, batches, state_bytes, train_steps


def offloaded_gpt2(make_store):
    """A GPT-2 offloaded with activations=True at budgets that hold it
    (the state on the device), its slots and an AdamW."""
    model = MODELS["gpt2"]()
    total = state_bytes(model)
    store = make_store(device_budget=total, host_budget=2 * total,
                       nvme_budget="256MiB")
    st.offload(model, store, activations=True)
    return (model, store, st._offload.state_of(model).activations,
            st.AdamW(model.parameters()))


def test_slots_are_reused_step_after_step(make_store):
    model, store, slots, opt = offloaded_gpt2(make_store)
    data = batches(steps=4, micro=2)
    train_steps(model, opt, data[:1])
    after_one = len(slots.slots)
    train_steps(model, opt, data[1:])
    assert after_one > 10
    assert len(slots.slots) == after_one  # the same ids every step
    assert slots.saved == 4 * 2 * after_one
    assert not any(slot.busy for slot in slots.slots)  # backward freed them
    for tier in ("device", "host", "nvme"):
        assert store.stats()["tiers"][tier]["leased_bytes"] == 0
    # The scheduler saw one cyclic step: its predictions hit.
    assert store.stats()["scheduler"]["hits"] > 0


def test_a_full_device_keeps_activations_in_torch(make_store):
    # A device budget that holds the largest module's parameters and little
    # more: saves that find no room stay in torch memory, and training is
    # still exact.
    plain, model = MODELS["mlp"](), MODELS["mlp"]()
    st.offload(model, make_store(device_budget="160KiB", host_budget="1MiB",
                                 nvme_budget="64MiB"), activations=True)
    opts = [st.AdamW(m.parameters(), lr=1e-2) for m in (plain, model)]
    data = batches(steps=3, micro=1, batch=8)
    assert train_steps(plain, opts[0], data) == train_steps(model, opts[1], data)
    slots = st._offload.state_of(model).activations
    assert slots.saved > 0 and slots.no_room > 0


class ReturnsItsSaved(torch.autograd.Function):
    """A backward that returns its saved tensor as the gradient (as fused
    loss kernels do): the gradient is the unpacked activation itself."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x * 2)
        return x.sum()

    @staticmethod
    def backward(ctx, grad):
        (saved,) = ctx.saved_tensors
        return saved


def test_a_gradient_that_is_an_unpacked_activation_keeps_its_slot(make_store):
    store = make_store(device_budget="1MiB", host_budget="2MiB")
    model = st.offload(torch.nn.Linear(64, 64), store, activations=True)
    x = torch.ones(64, 64, requires_grad=True)
    for step in range(3):
        ReturnsItsSaved.apply(model(x)).backward()
        assert x.grad is not None  # views a slot, which must not be reused
    slots = st._offload.state_of(model).activations
    assert not any(slot.busy for slot in slots.slots)


def test_varying_shapes_do_not_pile_up_slots(make_store):
    model, store, slots, opt = offloaded_gpt2(make_store)
    gen = torch.Generator().manual_seed(5)
    counts, saves = [], []
    for step in range(12):
        length = 8 + (step * 7) % 40  # padding to each batch's longest
        ids = torch.randint(0, 256, (2, length), generator=gen)
        before = slots.saved
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()
        counts.append(len(slots.slots))
        saves.append(slots.saved - before)
    # A slot lives while the forward that used it or the next one runs: at
    # most two forwards' saves, not the 12 forwards' sum.
    assert max(counts) <= 2 * max(saves) < sum(saves)
