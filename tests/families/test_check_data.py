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
