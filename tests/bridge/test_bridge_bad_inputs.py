"""Bad input to the Pyro bridge's guides outside SVI (their read-outs, calls without the data) and to the
models it recognises: one ValueError naming the argument or site, never torch's error or a silent result.
For the DP, HDP and relational guides alike."""

import pyro
import pytest
from pyro.infer import SVI

import pyro_memo as pm
from tests.bridge.test_memoized_elbo_batches import CASES, splits


def fitted(kind):
    pyro.clear_param_store()
    model, guide, call, n = CASES[kind](0)
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    for batch in splits(n, 0):
        svi.step(*call(batch))
    return model, guide, call


@pytest.mark.parametrize("kind", CASES)
def test_read_outs_refuse_a_number_of_draws_that_is_not_a_positive_whole_number(kind):
    """``sample_posterior(0)`` (or ``-1``) gave a DP guide's empty dict and an HDP or relational guide's
    "The expanded size of the tensor (-1) isn't allowed"; ``2.5`` was truncated to 2 draws; ``median`` and
    ``quantiles`` with ``num_samples=0`` raised torch's "quantile() input tensor must be non-empty"."""
    _, guide, _ = fitted(kind)
    for bad in (0, -1, 2.5, None, "3", True):
        with pytest.raises(ValueError, match=r"num_samples must be a positive integer; got"):
            guide.sample_posterior(bad)
    for read_out in (lambda: guide.median(num_samples=0), lambda: guide.quantiles([0.5], num_samples=0)):
        with pytest.raises(ValueError, match=r"num_samples must be a positive integer; got 0"):
            read_out()
    assert all(len(v) == 2 for v in guide.sample_posterior(2).values())


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("bad", [[1.5], [-0.1, 0.5], [float("nan")], ["a"], [[0.1], [0.2, 0.3]]])
def test_quantiles_refuse_levels_outside_zero_to_one(kind, bad):
    """A level outside [0, 1] or NaN raised torch's "quantile() q values must be in the range [0, 1]", a
    string "too many dimensions 'str'"."""
    _, guide, _ = fitted(kind)
    with pytest.raises(ValueError, match=r"quantiles must be numbers in \[0, 1\] \(one, or a list\); got"):
        guide.quantiles(bad, num_samples=10)
    assert all(v.shape[0] == 2 for v in guide.quantiles([0.0, 1.0], num_samples=10).values())
