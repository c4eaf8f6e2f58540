"""Plain Pyro models (pyro.sample / pyro.plate) that pyro-memo can run inference on."""

from .component_sites import index_components, sites_for
from .dp_mixture import DPMixtureModel

__all__ = ["DPMixtureModel", "index_components", "sites_for"]
