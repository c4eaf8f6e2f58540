"""The Pyro bridge: recognise a user's model, the guide, the memoized ELBO and optimizer."""

from .closed_form_optimizer import ClosedFormOptimizer
from .fit import fit_memoized, fit_vb
from .guide import DPMixtureGuide
from .memoized_elbo import MemoizedELBO
from .recognition import ModelSpec, ModelStructureError, recognize_model

__all__ = [
    "ClosedFormOptimizer",
    "DPMixtureGuide",
    "MemoizedELBO",
    "ModelSpec",
    "ModelStructureError",
    "fit_memoized",
    "fit_vb",
    "recognize_model",
]
