"""The shipped Pyro models check their arguments and the data in one clear error, also when Pyro traces
them (Pyro re-raises an error as its type built from its message), and recognition names the right guide."""

import numpy as np
import pyro
import pytest
import torch

import pyro_memo as pm
from pyro_memo.data import load_dataset
from pyro_memo.families import NonFiniteDataError
from pyro_memo.models import DPMixtureModel, HDPRelationalModel, HDPTopicModel

FAMILY = pm.Gaussian.from_data(torch.randn(20, 2, generator=torch.Generator().manual_seed(0)))


def nan_data():
    x = torch.randn(20, 2, generator=torch.Generator().manual_seed(1))
    x[3, 0] = float("nan")
    return x


@pytest.mark.parametrize("call", [
    lambda m, x: pyro.poutine.trace(m).get_trace(x),
    lambda m, x: pyro.infer.Predictive(m, num_samples=2)(x),
    lambda m, x: pm.fit_vb(m, x),
])
def test_nan_data_give_the_non_finite_error_under_pyros_handlers(call):
    with pytest.raises(NonFiniteDataError, match="gauss data has NaN or inf values in 1 of its 20 rows; the first is "
                                                 "row 3"):
        call(DPMixtureModel(FAMILY, 3), nan_data())


@pytest.mark.parametrize("args,error,match", [
    (("gauss", 3), TypeError, "family must be a family object"),
    ((pm.Gaussian, 3), TypeError, "family must be a family object"),
    ((FAMILY, 1), ValueError, "T must be at least 2"),
    ((FAMILY, 2.5), ValueError, "T must be a positive integer"),
    ((FAMILY, 3, float("inf")), ValueError, "alpha must be a positive finite number"),
])
def test_the_dp_mixture_model_checks_its_arguments(args, error, match):
    with pytest.raises(error, match=match):
        DPMixtureModel(*args)


@pytest.mark.parametrize("num_data", [0, -2, 2.5])
def test_generating_needs_a_positive_whole_number_of_items(num_data):
    with pytest.raises(ValueError, match="num_data must be a positive integer"):
        DPMixtureModel(FAMILY, 3)(num_data=num_data)
    assert DPMixtureModel(FAMILY, 3)(num_data=4).shape == (4, 2)


def test_a_relational_model_given_to_the_dp_guide_is_pointed_to_the_relational_guide():
    src, dst = torch.triu_indices(6, 6, 1)
    y = (torch.arange(len(src)) % 3 == 0).double()
    with pytest.raises(pm.ModelStructureError, match="is an HDP relational model: use pyro_memo.RelationalGuide"):
        pm.DPMixtureGuide(HDPRelationalModel(6, 2)).setup(src, dst, y)


@pytest.mark.parametrize("tau", [(1.0,), 5.0, (1.0, 2.0, 3.0)])
def test_a_malformed_tau_is_refused(tau):
    with pytest.raises(ValueError, match="tau must be a pair"):
        HDPRelationalModel(12, 3, tau=tau)


def test_load_dataset_keeps_its_contract(tmp_path):
    np.save(tmp_path / "one.npy", np.ones(3))
    np.savez(tmp_path / "short.npz", x=np.ones((3, 2)), labels=np.arange(5))
    np.savez(tmp_path / "frac.npz", x=np.ones((3, 2)), labels=[0.5, 1.2, 2.0])
    np.savez(tmp_path / "whole.npz", x=np.ones((3, 2)), labels=[0.0, 1.0, 2.0])
    for name, match in (("one.npy", r"an \(N, D\) array; got shape \(3,\)"), ("short.npz", r"shape \(3,\)"),
                        ("frac.npz", "whole numbers")):
        with pytest.raises(ValueError, match=match):
            load_dataset(tmp_path / name)
    _, labels, _ = load_dataset(tmp_path / "whole.npz")
    assert labels.dtype == np.int64 and labels.tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="a bundled name .* or a file path; got NoneType"):
        load_dataset(None)


@pytest.mark.parametrize("doc,word,num_docs,match", [
    ([-1, 0, 0, 1, 1], [0, 1, 2, 3, 4], None, r"doc must be non-negative; found \[-1, 1\]"),
    ([0, 0, 1, 1, 2], [0, 1, 2, 3, 4], 2, r"doc must lie in \[0, 2\); found \[0, 2\]"),
    ([0, 0, 1, 1, 2], [0, 1, 2, 3, 5], None, r"word must lie in \[0, 5\)"),
    ([0.5, 0, 1, 1, 2], [0, 1, 2, 3, 4], None, "doc must be whole-number ids"),
])
def test_the_topic_model_refuses_ids_that_would_wrap_or_be_truncated(doc, word, num_docs, match):
    """A document id of -1 used to index the last document, silently."""
    with pytest.raises(ValueError, match=match):
        pyro.poutine.trace(HDPTopicModel(5, 3)).get_trace(torch.tensor(doc), torch.tensor(word), num_docs)


@pytest.mark.parametrize("src,dst,match", [([-1, 0], [1, 2], r"src must lie in \[0, 5\)"),
                                           ([0, 1], [5, 2], r"dst must lie in \[0, 5\)"),
                                           ([0.5, 1.0], [1.0, 2.0], "src must be whole-number ids")])
def test_the_relational_model_refuses_node_ids_outside_its_nodes(src, dst, match):
    with pytest.raises(ValueError, match=match):
        pyro.poutine.trace(HDPRelationalModel(5, 3)).get_trace(torch.tensor(src), torch.tensor(dst))


def test_the_dp_model_draws_wishart_precisions_without_torchs_false_singular_warning():
    # drawing data from the model (or Predictive's first run of it) printed "Singular sample detected." on every
    # call: torch's check is inverted (it warns on positive-definite draws, pytorch/pytorch#122021)
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = pyro.poutine.trace(DPMixtureModel(FAMILY, 3)).get_trace(num_data=4)
        pyro.distributions.Wishart(FAMILY.prior["nu"], precision_matrix=FAMILY.prior["B"]).rsample((3,))
    singular = [w for w in caught if "Singular sample" in str(w.message)]
    assert len(singular) == 1 and singular[0].filename.endswith("test_model_arguments.py")  # the bare draw's only
    assert bool((torch.linalg.eigvalsh(trace.nodes["Lambda"]["value"]) > 0).all())
