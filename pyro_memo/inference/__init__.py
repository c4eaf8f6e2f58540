"""Inference algorithms on the exact DP-mixture ELBO."""

from .dp_mixture_posterior import DPMixturePosterior
from .full_batch_vb import FitResult, FullBatchVB
from .initialization import initial_responsibilities

__all__ = ["DPMixturePosterior", "FitResult", "FullBatchVB", "initial_responsibilities"]
