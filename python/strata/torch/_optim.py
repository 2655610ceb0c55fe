"""st.Adam and st.AdamW: torch optimizers that run strata's host Adam.

They are torch.optim.Optimizer subclasses (param_groups, LR schedulers and
training loops written for torch's optimizers work unchanged). Each step
updates one parameter at a time with strata's host Adam kernel
(strata._core.adam_update, the update `strata train` runs): for an
offloaded parameter on host-tier leases of its values, its gradient and its
two moments (store tensors homed where the parameter is), for a plain one
on its own memory. A plain and an offloaded copy of a model therefore step
bit for bit alike.

The step ends the store's step (end_step, begin_step): the scheduler learns
one optimizer step as one cyclic step, micro-batches included.
"""

import torch

from strata import _core
from strata._core import Access, Kind, Tier
from strata.torch._param import OffloadedParameter


class _HostAdam(torch.optim.Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.0, *, amsgrad=False, maximize=False,
                 foreach=None, capturable=False, differentiable=False,
                 fused=None):
        name = type(self).__name__
        for option, value in (("amsgrad", amsgrad), ("maximize", maximize),
                              ("capturable", capturable),
                              ("differentiable", differentiable),
                              ("fused", fused)):
            if value:
                raise ValueError(f"strata.torch.{name}: {option}=True is not "
                                 f"supported by strata's host Adam")
        del foreach  # accepted for torch's signature; one kernel either way
        if not lr >= 0.0:
            raise ValueError(f"invalid learning rate: {lr}")
        if not all(0.0 <= b < 1.0 and _as_float32(b) < 1.0 for b in betas):
            raise ValueError(f"invalid betas: {betas} (each in [0, 1) in "
                             f"float32, where the update runs)")
        if not eps >= 0.0:
            raise ValueError(f"invalid eps: {eps}")
        if not weight_decay >= 0.0:
            raise ValueError(f"invalid weight_decay: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.dtype != torch.float32:
                    raise ValueError(
                        f"strata's host Adam updates fp32 parameters; one is "
                        f"{p.dtype}")
        self._check_host_budget()

    def _check_host_budget(self):
        # A step holds a parameter, its gradient and both moments on the
        # host tier at once: refuse a host budget that cannot, now rather
        # than at the first step.
        largest = {}  # id(store) -> (rounded bytes, name, store)
        for group in self.param_groups:
            for p in group["params"]:
                if isinstance(p, OffloadedParameter):
                    rec = p._strata
                    size = _host_rounded(4 * p.numel())
                    key = id(rec.state.store)
                    if size > largest.get(key, (0,))[0]:
                        largest[key] = (size, rec.name, rec.state.store)
        for size, name, store in largest.values():
            capacity = store.stats()["tiers"]["host"]["capacity_bytes"]
            need = 4 * size
            if need > capacity:
                raise ValueError(
                    f"strata.torch: the host budget ({capacity} bytes) cannot "
                    f"hold one Adam step of {name}: its values, gradient and "
                    f"two moments ({need} bytes) are on the host at once. "
                    f"Raise host_budget to at least {need} bytes.")

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if isinstance(p, OffloadedParameter):
                    if set_to_none:
                        p._strata.set_grad(None)  # discarded: no write-back
                    else:
                        p._strata.zero_grad()
                elif p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.detach_()
                        p.grad.zero_()

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        stores = {}
        for group in self.param_groups:
            for p in group["params"]:
                if isinstance(p, OffloadedParameter):
                    rec = p._strata
                    if rec.state.all_materialized:
                        # The block's copies would be stale, and written
                        # back over this step on exit.
                        raise RuntimeError(
                            "strata: optimizer step inside "
                            "st.materialized(model): step after the block")
                    if rec.grad_pending:
                        self._step_offloaded(p, rec, group)
                    stores[id(rec.state.store)] = rec.state.store
                elif p.grad is not None:
                    self._step_plain(p, group)
        for store in stores.values():
            store.end_step()
            store.begin_step()
        return loss

    def moments(self, p):
        """(exp_avg, exp_avg_sq) of `p` as CPU tensors (copies), or None
        before its first step."""
        state = self.state.get(p, {})
        if "exp_avg" in state:
            return state["exp_avg"].clone(), state["exp_avg_sq"].clone()
        if "exp_avg_id" not in state:
            return None
        rec, out = p._strata, []
        for key in ("exp_avg_id", "exp_avg_sq_id"):
            t = torch.empty(rec.shape, dtype=torch.float32)
            if rec.state.store.residency(state[key])["has_contents"]:
                rec.state.store.read(state[key], t)
            else:  # created, never written: zeros, as a write lease shows
                t.zero_()
            out.append(t)
        return tuple(out)

    def _count(self, p):
        state = self.state[p]
        state["step"] = state.get("step", 0) + 1
        return state["step"]

    def _update(self, w, m, v, g, group, step):
        lr, wd = group["lr"], group["weight_decay"]
        if wd != 0.0:
            if self._decoupled:  # AdamW: w *= 1 - lr * wd, then Adam
                w.mul_(1.0 - lr * wd)
            else:  # Adam's L2 penalty, as torch.optim.Adam adds it
                g = g.add(w, alpha=wd)
        beta1, beta2 = group["betas"]
        _core.adam_update(w, m, v, g, lr, beta1, beta2, group["eps"], step)

    def _step_plain(self, p, group):
        w, g = p.data, p.grad
        if g.is_sparse or not (w.is_contiguous() and g.is_contiguous()):
            raise ValueError("strata's host Adam takes dense, contiguous "
                             "parameters and gradients")
        state = self.state[p]
        if "exp_avg" not in state:  # on the host, where the update runs
            state["exp_avg"] = torch.zeros(w.shape, dtype=w.dtype)
            state["exp_avg_sq"] = torch.zeros(w.shape, dtype=w.dtype)
        step = self._count(p)
        if w.device.type == "cpu":
            self._update(w, state["exp_avg"], state["exp_avg_sq"], g, group, step)
            return
        # A plain parameter on a GPU: the same host update on copies (for
        # comparisons with offloaded runs, not for speed).
        host_w = w.cpu()
        self._update(host_w, state["exp_avg"], state["exp_avg_sq"], g.cpu(),
                     group, step)
        w.copy_(host_w)

    def _step_offloaded(self, p, rec, group):
        store = rec.state.store
        state = self.state[p]
        self._create_moments(rec, state)
        step = self._count(p)
        w = rec.lease_tensor(Tier.HOST, Access.WRITE)
        g = rec.grad_tensor(Access.READ)
        m = torch.from_dlpack(
            store.acquire(state["exp_avg_id"], Tier.HOST, Access.WRITE))
        v = torch.from_dlpack(
            store.acquire(state["exp_avg_sq_id"], Tier.HOST, Access.WRITE))
        self._update(w, m, v, g, group, step)
        rec.updates += 1  # saved handles of the old values now refuse

    # The optimizer's state_dict holds every moment as a tensor, for
    # offloaded parameters too (read from the store), so torch.save of it
    # is a checkpoint and load_state_dict restores it, into the store.

    def state_dict(self):
        packed = super().state_dict()
        by_index = self._offloaded_by_index()
        states = {}
        for index, state in packed["state"].items():
            p = by_index.get(index)
            state = dict(state)
            if p is not None and "exp_avg_id" in state:
                m, v = self.moments(p)
                del state["exp_avg_id"], state["exp_avg_sq_id"]
                state["exp_avg"], state["exp_avg_sq"] = m, v
            states[index] = state
        packed["state"] = states
        return packed

    def load_state_dict(self, state_dict):
        # The store tensors of moments this optimizer already has are
        # reused: torch's load replaces every state dict.
        ids = {p: {k: v for k, v in st.items() if k.endswith("_id")}
               for p, st in self.state.items()
               if isinstance(p, OffloadedParameter)}
        super().load_state_dict(state_dict)
        for p, kept in ids.items():
            if kept and "exp_avg" in self.state.get(p, {}):
                self.state[p].update(kept)
        for p in list(self.state):
            if not isinstance(p, OffloadedParameter):
                continue
            state = self.state[p]
            if "exp_avg_id" in state and "exp_avg" not in state:
                continue  # already in the store
            if "exp_avg" not in state:
                continue
            self._create_moments(p._strata, state)
            rec = p._strata
            for key in ("exp_avg", "exp_avg_sq"):
                values = state.pop(key).detach().to("cpu", torch.float32)
                if tuple(values.shape) != rec.shape:
                    raise ValueError(
                        f"strata: the loaded {key} of {rec.name} is "
                        f"{tuple(values.shape)}; the parameter is {rec.shape}")
                rec.state.store.write(state[key + "_id"], values.contiguous())

    def _offloaded_by_index(self):
        index, out = 0, {}
        for group in self.param_groups:
            for p in group["params"]:
                if isinstance(p, OffloadedParameter):
                    out[index] = p
                index += 1
        return out

    @staticmethod
    def _create_moments(rec, state):
        if "exp_avg_id" in state:
            return
        # Store tensors with no contents yet (a write lease presents
        # zeros), homed with the parameter.
        for key, suffix in (("exp_avg_id", ".exp_avg"),
                            ("exp_avg_sq_id", ".exp_avg_sq")):
            state[key] = rec.state.store.create(
                rec.name + suffix, shape=list(rec.shape) or None,
                size_bytes=None if rec.shape else 4,
                dtype=_core.DType.FLOAT32, kind=Kind.OPTIMIZER_STATE,
                home=rec.state.home)


def _as_float32(x):
    return torch.tensor(float(x), dtype=torch.float32).item()


def _host_rounded(size):
    # The host tier's allocation granule (strata/options.h).
    granule = 4096
    return (size + granule - 1) // granule * granule


class Adam(_HostAdam):
    """Adam (Kingma & Ba, 2015) on strata's host kernel; weight_decay is an
    L2 penalty added to the gradient, as torch.optim.Adam's."""


class AdamW(_HostAdam):
    """AdamW (Loshchilov & Hutter, 2019) on strata's host kernel: decoupled
    weight decay (w *= 1 - lr * weight_decay before the update), as
    torch.optim.AdamW's. Default weight_decay 0.01, as torch's."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.01, **options):
        super().__init__(params, lr, betas, eps, weight_decay, **options)
