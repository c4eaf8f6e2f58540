"""Each family's ``example_data`` (the tests' and the docs' data) is a function of its generator alone."""

import pytest
import torch

import pyro_memo as pm


@pytest.mark.parametrize("name", sorted(pm.FAMILIES))
def test_example_data_depend_on_the_generator_alone(name):
    def draw(seed, global_seed):
        torch.manual_seed(global_seed)
        g = torch.Generator().manual_seed(seed)
        return pm.get_family(name).example_data(torch.randint(3, (40,), generator=g), 3, 4, g)

    first = draw(0, 0)
    assert torch.equal(first, draw(0, 123))  # the global generator plays no part
    assert not torch.equal(first, draw(1, 0))
