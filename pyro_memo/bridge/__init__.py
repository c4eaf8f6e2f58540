"""The Pyro bridge: recognise a user's model, the guide, the memoized ELBO and optimizer."""

from .closed_form_optimizer import ClosedFormOptimizer
from .fit import fit_memoized, fit_vb
from .guide import DPMixtureGuide
from .memoized_elbo import MemoizedELBO
from .pyro_svi import PyroSVI
from .recognition import ModelSpec, ModelStructureError, recognize_model

__all__ = [
    "ClosedFormOptimizer",
    "DPMixtureGuide",
    "MemoizedELBO",
    "ModelSpec",
    "ModelStructureError",
    "PyroSVI",
    "fit_memoized",
    "fit_vb",
    "recognize_model",
]
