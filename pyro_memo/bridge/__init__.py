"""The Pyro bridge: recognise a user's model, the guide, the memoized ELBO and optimizer."""

from .closed_form_optimizer import ClosedFormOptimizer
from .fit import ConvergenceWarning, TopicFitResult, fit_memoized, fit_vb
from .guide import DPMixtureGuide
from .hdp_gap import normaliser_gap
from .hdp_guide import HDPGuide
from .hdp_recognition import HDPSpec, batch_tokens
from .memoized_elbo import MemoizedELBO
from .pyro_svi import PyroSVI
from .recognition import ModelSpec, ModelStructureError, recognize_model
from .relational_gap import relational_normaliser_gap
from .relational_guide import RelationalGuide
from .relational_recognition import RelationalSpec, batch_pairs

__all__ = [
    "ClosedFormOptimizer",
    "ConvergenceWarning",
    "DPMixtureGuide",
    "HDPGuide",
    "HDPSpec",
    "MemoizedELBO",
    "ModelSpec",
    "ModelStructureError",
    "PyroSVI",
    "RelationalGuide",
    "RelationalSpec",
    "TopicFitResult",
    "batch_pairs",
    "batch_tokens",
    "fit_memoized",
    "fit_vb",
    "normaliser_gap",
    "recognize_model",
    "relational_normaliser_gap",
]
