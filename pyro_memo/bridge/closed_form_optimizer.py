"""The closed-form global update as a Pyro optimizer."""

import torch
from pyro.optim import PyroOptim


class ClosedFormOptimizer(PyroOptim):
    """Applies the closed-form coordinate update (Hughes & Sudderth 2013, eq. 10) inside ``SVI.step``.

    :class:`MemoizedELBO` writes ``current - optimum`` into each variational parameter's
    gradient (in Pyro's unconstrained space); a unit gradient step therefore moves every
    parameter exactly to its closed-form optimum. No learning rate is involved.
    """

    def __init__(self):
        super().__init__(torch.optim.SGD, {"lr": 1.0})
