"""The Pyro bridge: recognise a user's model, the guide, and fitting entry points."""

from .fit import fit_vb
from .guide import DPMixtureGuide
from .recognition import ModelSpec, ModelStructureError, recognize_model

__all__ = ["DPMixtureGuide", "ModelSpec", "ModelStructureError", "fit_vb", "recognize_model"]
