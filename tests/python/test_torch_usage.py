"""strata.torch under the ways users drive torch: gradients kept in a
variable, activation checkpointing (reentrant and not), autograd.grad,
zero_grad without set_to_none, torch-signature arguments."""

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import strata.torch as st
from torch_models import DEVICE, MODELS, batches, state_bytes, train_steps


def store_for(make_store, model):
    total = state_bytes(model)
    return make_store(device_budget=total // 5, host_budget=total // 2,
                      nvme_budget="64MiB")


def test_a_gradient_kept_in_a_variable_is_the_gradient(make_store):
    # Logging code keeps p.grad: the step, the next backward and zero_grad
    # go through that same view, and it holds what torch's would.
    plain, model = MODELS["mlp"](), MODELS["mlp"]()
    st.offload(model, store_for(make_store, model))
    opts = [st.AdamW(m.parameters(), lr=1e-2) for m in (plain, model)]
    data = batches(steps=3, micro=2)
    for m, opt in zip((plain, model), opts):
        kept = None
        for micro in data:
            for ids in micro:
                m(input_ids=ids, labels=ids).loss.backward()
                kept = m.layers[0].weight.grad
            norm = kept.norm().item()
            assert norm > 0
            opt.step()
            opt.zero_grad()
    with st.materialized(model):
        for a, b in zip(plain.parameters(), model.parameters()):
            assert torch.equal(a.cpu(), b)


class Checkpointed(torch.nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.reentrant = reentrant
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 16)
        self.head = torch.nn.Linear(16, 4)

    def block(self, x):
        return self.b(torch.tanh(self.a(x)))

    def forward(self, x):
        return self.head(checkpoint(self.block, x, use_reentrant=self.reentrant))


@pytest.mark.parametrize("reentrant", [True, False])
def test_activation_checkpointing_is_exact(make_store, reentrant):
    def make():
        torch.manual_seed(0)
        return Checkpointed(reentrant).to(DEVICE)

    plain, model = make(), make()
    st.offload(model, make_store(device_budget="8KiB", host_budget="64KiB"))
    x = torch.randn(8, 16, device=DEVICE, requires_grad=True)
    opts = [st.Adam(m.parameters(), lr=1e-2) for m in (plain, model)]
    losses = [[], []]
    for _ in range(3):
        for i, (m, opt) in enumerate(zip((plain, model), opts)):
            loss = m(x).square().mean()
            loss.backward()
            losses[i].append(loss.item())
            opt.step()
            opt.zero_grad()
    assert losses[0] == losses[1]


def test_hf_gradient_checkpointing_is_exact(make_store):
    plain, model = MODELS["gpt2"](), MODELS["gpt2"]()
    for m in (plain, model):
        m.gradient_checkpointing_enable()
        m.train()
    st.offload(model, store_for(make_store, model))
    opts = [st.AdamW(m.parameters(), lr=1e-3) for m in (plain, model)]
    data = batches(steps=2, micro=1)
    assert (train_steps(plain, opts[0], data, clip=1.0) ==
            train_steps(model, opts[1], data, clip=1.0))


def test_autograd_grad_reaches_offloaded_parameters(make_store):
    plain, model = MODELS["mlp"](), MODELS["mlp"]()
    st.offload(model, store_for(make_store, model))
    ids = batches(1, 1)[0][0]
    grads = []
    for m in (plain, model):
        loss = m(input_ids=ids, labels=ids).loss
        grads.append(torch.autograd.grad(loss, list(m.parameters())))
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_zero_grad_without_set_to_none_zeroes(make_store):
    model = MODELS["mlp"]()
    st.offload(model, store_for(make_store, model))
    opt = st.AdamW(model.parameters())
    ids = batches(1, 1)[0][0]
    model(input_ids=ids, labels=ids).loss.backward()
    opt.zero_grad(set_to_none=False)
    g = model.layers[0].weight.grad
    assert g is not None and not bool(g.abs().sum() > 0)
    del g
    opt.zero_grad()
    assert model.layers[0].weight.grad is None


def test_a_host_budget_too_small_for_a_step_is_refused_up_front(make_store):
    model = MODELS["mlp"]()  # its largest parameter: 128 x 128 fp32
    st.offload(model, make_store(device_budget="256KiB", host_budget="200KiB"))
    with pytest.raises(ValueError, match="host_budget to at least 262144"):
        st.AdamW(model.parameters())


def test_moving_an_offloaded_model_says_to_move_it_before(make_store):
    model = MODELS["mlp"]()
    st.offload(model, make_store())
    with pytest.raises(RuntimeError, match="before strata.torch.offload"):
        model.to(torch.float64)


def test_torch_signature_arguments(make_store):
    model = MODELS["mlp"]()
    with pytest.raises(ValueError, match="amsgrad=True is not supported"):
        st.AdamW(model.parameters(), amsgrad=True)
    st.Adam(model.parameters(), foreach=True)  # accepted, one kernel
    ids = batches(1, 1)[0][0]
    model(input_ids=ids, labels=ids).loss.backward()
    model.layers[0].weight.grad[0, 0] = float("inf")
    with pytest.raises(RuntimeError, match="non-finite"):
        st.clip_grad_norm_(model, 1.0, error_if_nonfinite=True)
    inf_norm = st.clip_grad_norm_(model, 1.0, norm_type=float("inf"))
    assert inf_norm.item() == float("inf")
