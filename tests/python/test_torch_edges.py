"""strata.torch at the edges a break-it pass found: forwards inside
st.materialized, write-backs that would store the wrong bytes, parameters
changed in place during forward, unfrozen later, updated between forward
and backward, optimizer checkpoints, an offload that fails part-way, 0-d
parameters."""

import pytest
import torch

import strata.torch as st
from torch_models import DEVICE, MODELS, batches, state_bytes, train_steps


def small():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4)).to(DEVICE)


def values(model):
    with st.materialized(model):
        return [p.detach().clone() for p in model.parameters()]


def test_a_forward_inside_materialized_computes_on_the_copies(make_store):
    # The copies are CPU tensors: the forward runs on the CPU.
    model = st.offload(small(), make_store())
    before = values(model)
    x = torch.randn(2, 16)
    with st.materialized(model):
        inside = model(x)
    assert torch.equal(inside, small().cpu()(x))
    assert all(torch.equal(a, b) for a, b in zip(before, values(model)))


def test_a_write_back_of_the_wrong_dtype_writes_nothing(make_store):
    model = st.offload(small(), make_store())
    before = values(model)
    with pytest.raises(ValueError, match="wrote nothing back.*float16"):
        with st.materialized(model, writable=True):
            model.half()
    assert all(torch.equal(a, b) for a, b in zip(before, values(model)))
    with pytest.raises(RuntimeError, match="offloaded"):
        model[0].weight.sum()  # the placeholders are back


class Clamped(torch.nn.Module):
    """A temperature clamped in place in forward (as CLIP-style models do)."""

    def __init__(self):
        super().__init__()
        self.temp = torch.nn.Parameter(torch.full((4,), 5.0))

    def forward(self, x):
        with torch.no_grad():
            self.temp.clamp_(0.5, 1.0)
        return (x / self.temp).sum()


def test_a_parameter_changed_in_place_during_forward_keeps_the_change(make_store):
    plain, model = Clamped().to(DEVICE), Clamped().to(DEVICE)
    st.offload(model, make_store(device_budget="64KiB", host_budget="1MiB"))
    x = torch.ones(4, device=DEVICE)
    assert plain(x).item() == model(x).item()
    with st.materialized(model):
        assert torch.equal(model.temp, plain.temp.detach().cpu())


def test_a_parameter_unfrozen_after_offload_trains(make_store):
    plain, model = small(), small()
    for m in (plain, model):
        m[0].weight.requires_grad_(False)
    st.offload(model, make_store())
    opts = [st.AdamW(m.parameters(), lr=1e-2) for m in (plain, model)]
    for m in (plain, model):
        m[0].weight.requires_grad_(True)
    x = torch.randn(8, 16, device=DEVICE)
    for _ in range(3):
        for m, opt in zip((plain, model), opts):
            m(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
    with st.materialized(model):
        assert torch.equal(model[0].weight, plain[0].weight.detach().cpu())
    assert not torch.equal(plain[0].weight, small()[0].weight)  # it moved


def test_an_update_between_forward_and_backward_is_refused(make_store):
    model = st.offload(small(), make_store())
    opt = st.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(8, 16, device=DEVICE)
    model(x).square().mean().backward()
    loss = model(x).square().mean()
    opt.step()  # changes the weights loss's graph saved
    with pytest.raises(RuntimeError, match="changed .by the optimizer"):
        loss.backward()


def test_betas_that_round_to_one_in_float32_are_refused():
    with pytest.raises(ValueError, match="float32"):
        st.Adam(small().parameters(), betas=(0.9, 0.99999999))


def test_an_optimizer_checkpoint_resumes_bitwise(make_store, tmp_path):
    # 3 steps, save the weights and optimizer state, 2 more steps; against
    # a fresh model and optimizer loaded from the save, 2 steps.
    data = batches(steps=5, micro=1)
    model = MODELS["mlp"]()
    st.offload(model, make_store(device_budget="256KiB", host_budget="512KiB"))
    opt = st.AdamW(model.parameters(), lr=1e-2)

    train_steps(model, opt, data[:3])
    with st.materialized(model):
        torch.save(model.state_dict(), tmp_path / "model.pt")
    torch.save(opt.state_dict(), tmp_path / "opt.pt")
    train_steps(model, opt, data[3:])

    resumed = MODELS["mlp"]()
    resumed.load_state_dict(torch.load(tmp_path / "model.pt"))
    st.offload(resumed, make_store(device_budget="256KiB", host_budget="512KiB"))
    opt2 = st.AdamW(resumed.parameters(), lr=1e-2)
    opt2.load_state_dict(torch.load(tmp_path / "opt.pt"))
    train_steps(resumed, opt2, data[3:])
    for a, b in zip(values(model), values(resumed)):
        assert torch.equal(a, b)
    for a, b in zip(model.parameters(), resumed.parameters()):
        assert all(torch.equal(x, y) for x, y in zip(opt.moments(a), opt2.moments(b)))


def test_an_offload_that_fails_part_way_leaves_the_model_as_it_was(make_store):
    model = MODELS["mlp"]()
    plain = MODELS["mlp"]()
    store = make_store(nvme_budget="512KiB")  # too small for the state
    with pytest.raises(st.StrataError) as e:
        st.offload(model, store)
    assert e.value.code == "RESOURCE_EXHAUSTED"
    assert not st.is_offloaded(model)
    assert all(type(p) is torch.nn.Parameter for p in model.parameters())
    assert store.stats()["tensors"] == 0
    for a, b in zip(model.parameters(), plain.parameters()):
        assert torch.equal(a, b)
    st.offload(model, make_store(nvme_budget="64MiB"))  # and later it can be


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.scale = torch.nn.Parameter(torch.tensor(2.0))  # 0-d

    def forward(self, x):
        return self.lin(x) * self.scale


def test_a_zero_dimensional_parameter_trains_exactly(make_store):
    def make():
        torch.manual_seed(0)
        return Scaled().to(DEVICE)

    plain, model = make(), make()
    st.offload(model, make_store())
    assert model.scale.shape == ()
    opts = [st.Adam(m.parameters(), lr=1e-2) for m in (plain, model)]
    x = torch.randn(3, 4, device=DEVICE)
    for _ in range(3):
        for m, opt in zip((plain, model), opts):
            m(x).square().sum().backward()
            opt.step()
            opt.zero_grad()
    with st.materialized(model):
        assert torch.equal(model.scale, plain.scale.detach().cpu())


class ChangedAfterSave(torch.nn.Module):
    """Changes in place a tensor autograd saved (exp saves its result)."""

    def __init__(self, width):
        super().__init__()
        self.lin = torch.nn.Linear(width, width)

    def forward(self, x):
        y = self.lin(x).exp()
        y.add_(1)
        return y.sum()


def test_a_saved_tensor_changed_in_place_raises_as_in_torch(make_store):
    # Saved-tensor hooks turn torch's version check off; strata makes it.
    model = ChangedAfterSave(8).to(DEVICE)
    st.offload(model, make_store())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        model(torch.randn(4, 8, device=DEVICE)).backward()


def test_parameters_saved_under_another_context_are_values_not_placeholders(
        make_store):
    # A pass-through saved_tensors_hooks around the model, and a forward
    # inside st.materialized with its backward after the block: autograd
    # gets the values, never the Parameter (whose .data is the placeholder
    # by backward).
    plain, model = small(), small()
    st.offload(model, make_store())
    x = torch.randn(4, 16, device=DEVICE)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        model(x).square().sum().backward()
        plain(x).square().sum().backward()
    for a, b in zip(plain.parameters(), model.parameters()):
        assert torch.equal(a.grad.cpu(), b.grad.cpu())
    with st.materialized(model):
        loss = model(x.cpu()).square().sum()
    loss.backward()  # after the block
    assert all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())


def test_a_step_inside_materialized_is_refused(make_store):
    model = st.offload(small(), make_store())
    opt = st.AdamW(model.parameters())
    model(torch.randn(4, 16, device=DEVICE)).sum().backward()
    with st.materialized(model, writable=True):
        with pytest.raises(RuntimeError, match="inside st.materialized"):
            opt.step()


def test_a_gradient_present_at_offload_moves_to_the_store(make_store):
    plain, model = small(), small()
    x = torch.randn(4, 16, device=DEVICE)
    for m in (plain, model):
        m(x).sum().backward()
    st.offload(model, make_store())
    for a, b in zip(plain.parameters(), model.parameters()):
        assert torch.equal(a.grad.cpu(), b.grad)
    del model[0].weight.grad  # `del p.grad` clears it, as in torch
    assert model[0].weight.grad is None


def test_loading_optimizer_state_again_reuses_the_moments(make_store):
    store = make_store()
    model = st.offload(small(), store)
    opt = st.AdamW(model.parameters())
    model(torch.randn(4, 16, device=DEVICE)).sum().backward()
    opt.step()
    saved = opt.state_dict()
    tensors = store.stats()["tensors"]
    for _ in range(3):
        opt.load_state_dict(saved)
    assert store.stats()["tensors"] == tensors
