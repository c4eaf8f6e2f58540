"""``ConjugateFamily.check_data``'s magnitude bound: sums of the statistics' highest power over the rows
cannot overflow the dtype."""

import math

import pytest
import torch

import pyro_memo as pm
from pyro_memo.families.base import check_magnitude


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (1000, 25)])
def test_the_bound_sits_where_n_d_max_to_the_degree_reaches_the_largest_number(dtype, degree, shape):
    limit = torch.finfo(dtype).max
    edge = math.exp((math.log(limit) - math.log(shape[0] * shape[1])) / degree)
    x = torch.zeros(shape, dtype=torch.float64)
    x[-1, -1] = edge * 0.99
    check_magnitude(x.to(dtype), "fam", degree)
    if edge * 1.01 > limit:  # one number of degree 1: no finite value can overflow
        x[-1, -1] = -limit
        check_magnitude(x.to(dtype), "fam", degree)
        return
    x[-1, -1] = -edge * 1.01
    x = x.to(dtype)
    with pytest.raises(ValueError, match=f"fam data has values up to .* its {shape[0]} rows can overflow"):
        check_magnitude(x, "fam", degree)


def test_gaussian_families_bound_squares_and_count_families_values(family_name):
    cls = pm.get_family(family_name)
    assert cls.stat_degree == (2 if "gauss" in family_name else 1)


def test_zeros_pass():
    check_magnitude(torch.zeros(3, 2), "fam", 2)


@pytest.mark.parametrize("option,value,match", [
    ("device", "gpu", "device gpu: not a torch device"), ("device", "meta", "meta is not supported"),
    ("dtype", "float32", "dtype must be torch.float32 or torch.float64; got 'float32'"),
    ("dtype", torch.float16, "dtype must be torch.float32 or torch.float64; got torch.float16"),
    ("dtype", torch.int64, "dtype must be torch.float32 or torch.float64; got torch.int64")])
def test_a_family_on_a_device_or_dtype_the_fits_do_not_run_on_is_refused(option, value, match):
    """from_data(device="gpu") and .to(device="gpu") raised torch's RuntimeError, dtype="float32" torch's
    TypeError, float16 "cholesky_cpu not implemented for 'Half'" and int64 torch.finfo's TypeError."""
    x = torch.randn(20, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match=match):
        pm.Gaussian.from_data(x, **{option: value})
    with pytest.raises(ValueError, match=match):
        pm.Gaussian.from_data(x).to(**{option: value})
