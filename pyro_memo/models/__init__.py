"""Plain Pyro models (pyro.sample / pyro.plate) that pyro-memo can run inference on."""

from .component_sites import index_components, sites_for
from .dp_mixture import DPMixtureModel
from .hdp_relational import HDPRelationalGuide, HDPRelationalModel
from .hdp_topic import HDPTopicGuide, HDPTopicModel

__all__ = ["DPMixtureModel", "HDPRelationalGuide", "HDPRelationalModel", "HDPTopicGuide", "HDPTopicModel",
           "index_components", "sites_for"]
