"""st.clip_grad_norm_: gradient clipping that sees offloaded gradients.

As torch.nn.utils.clip_grad_norm_ computes it (each gradient's norm, the
norm of those, coefficient max_norm / (total + 1e-6) clamped to 1, every
gradient scaled in place), but one gradient at a time: an offloaded
gradient is a host-tier lease held only while it is read or scaled, so
the host budget never has to hold them all. For plain parameters it reads
p.grad. Gradients that exist nowhere are an error, not a silent 0
(torchtitan #990).
"""

import torch

from strata.torch._param import OffloadedParameter, _get_grad


def _gradient(p):
    if isinstance(p, OffloadedParameter):
        return _get_grad(p._strata)
    return p.grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0,
                    error_if_nonfinite=False, foreach=None):
    """Clips the gradients of `parameters` (a module, or an iterable of
    parameters) to total norm `max_norm` (`norm_type`: the p of the
    p-norm, inf included); returns the total norm before clipping (a 0-d
    tensor). Raises RuntimeError when no parameter has a gradient, and,
    with error_if_nonfinite, when the norm is nan or inf (as torch's).
    `foreach` is accepted for torch's signature; gradients are taken one
    at a time."""
    if isinstance(parameters, torch.nn.Module):
        seen, params = set(), []
        for p in parameters.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                params.append(p)
    elif isinstance(parameters, torch.Tensor):
        params = [parameters]
    else:
        params = list(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    norms = []
    with torch.no_grad():
        for p in params:
            g = _gradient(p)
            if g is not None:
                norms.append(torch.linalg.vector_norm(g, norm_type).cpu())
            del g
        if not norms:
            raise RuntimeError(
                "clip_grad_norm_: no parameter has a gradient (call it after "
                "backward, before the optimizer's step and zero_grad)")
        total = torch.linalg.vector_norm(torch.stack(norms), norm_type)
        if error_if_nonfinite and not bool(torch.isfinite(total)):
            raise RuntimeError(
                f"clip_grad_norm_: the total norm of order {norm_type} of the "
                f"gradients is non-finite ({total.item()})")
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for p in params:
            g = _gradient(p)
            if g is not None:
                g.mul_(coef.to(g.device))
            del g
    return total
