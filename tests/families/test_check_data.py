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


def test_float64_data_beyond_float32s_range_are_named_as_such_not_as_nan(family_name):
    """Finite float64 data too large for a float32 family were reported as "NaN or inf values" (their conversion
    made them inf), by from_data and by a fit; the error now says they are beyond float32's range, and real NaN
    are still reported as NaN."""
    x = torch.ones(6, 3, dtype=torch.float64)
    x[4, 1] = 1e39
    cls = pm.get_family(family_name)
    family = cls.from_data(torch.ones(6, 3, dtype=torch.float64), dtype=torch.float32)
    match = r"beyond float32's range \(largest 3.4e\+38\) in 1 of its 6 rows, up to 1e\+39 in magnitude; the first " \
            r"is row 4: rescale the data"
    with pytest.raises(ValueError, match=match):
        cls.from_data(x, dtype=torch.float32)
    with pytest.raises(ValueError, match=match):
        family.check_data(x)
    with pytest.raises(ValueError, match="batch 2 of 2 .*beyond float32's range"):
        pm.MemoizedVB(family, K=2, laps=2).fit(x, num_batches=2)
    x[1, 0] = float("nan")
    with pytest.raises(pm.families.NonFiniteDataError, match="NaN or inf values in 1 of its 6 rows; the first is row "
                                                             "1"):
        family.check_data(torch.where(torch.isnan(x), x, torch.ones_like(x)))
