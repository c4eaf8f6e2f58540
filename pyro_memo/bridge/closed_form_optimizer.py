"""The closed-form global update as a Pyro optimizer."""

import pyro
import torch
from pyro.optim import PyroOptim

#: the attribute :class:`~pyro_memo.MemoizedELBO` sets on a parameter whose gradient it wrote
_MARK = "_pyro_memo_closed_form"


def mark_closed_form(unconstrained):
    """Mark the unconstrained parameter ``unconstrained``: its ``.grad`` holds the closed-form update."""
    setattr(unconstrained, _MARK, True)


def take_pending(unconstrained):
    """Whether ``unconstrained`` still holds a closed-form update that no :class:`ClosedFormOptimizer` applied
    (an earlier step's optimizer was another one); clears the mark."""
    pending = getattr(unconstrained, _MARK, False)
    setattr(unconstrained, _MARK, False)
    return pending


class ClosedFormOptimizer(PyroOptim):
    """Applies the closed-form coordinate update (Hughes & Sudderth 2013, eq. 10) inside ``SVI.step``.

    :class:`MemoizedELBO` writes ``current - optimum`` into each variational parameter's
    gradient (in Pyro's unconstrained space); a unit gradient step therefore moves every
    parameter exactly to its closed-form optimum. No learning rate is involved.

    :raises ValueError: before any parameter moves, if a parameter's gradient came from another loss
        (e.g. ``Trace_ELBO``), where a unit step would be a meaningless jump.
    """

    def __init__(self):
        super().__init__(torch.optim.SGD, {"lr": 1.0})

    def __call__(self, params, *args, **kwargs):
        stepped = [p for p in params if p.grad is not None]
        foreign = [p for p in stepped if not getattr(p, _MARK, False)]
        if foreign:
            name = pyro.get_param_store().param_name(foreign[0]) or "a parameter"
            raise ValueError(f"ClosedFormOptimizer applies the closed-form update that pyro_memo.MemoizedELBO writes "
                             f"as gradients; the gradient of '{name}' came from another loss. Use SVI(model, guide, "
                             f"ClosedFormOptimizer(), MemoizedELBO()), or a gradient optimizer such as "
                             f"pyro.optim.Adam with other ELBOs")
        super().__call__(params, *args, **kwargs)
        for p in stepped:
            setattr(p, _MARK, False)
