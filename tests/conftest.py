import os

import pytest
import torch

import pyro_memo as pm

FAMILY_NAMES = sorted(pm.FAMILIES)


def pytest_configure(config):
    """One intra-op thread for the suite and the processes it starts. The drivers' thread policy picks a
    thread count by timing, and different counts split sums differently, so two fits compared bit for
    bit would otherwise depend on the machine's load; the tests of the policy set their own count."""
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"


def pytest_collection_modifyitems(items):
    """The tests marked ``slow`` run first (in their collected order), so that under ``-n auto`` the suite
    ends on short tests rather than on one worker finishing a long one alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``-n`` with xdist's default ``--dist load``, work stealing instead: ``load`` hands the first
    worker one contiguous chunk of a quarter of its share, which holds every slow test once they are
    sorted first, while work stealing splits the tests in halves and lets an idle worker take the back of
    another's queue, so both stay busy to the end. Any other ``--dist`` is left as asked."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)


def make_data(name, N, D=2, seed=0, clusters=3):
    """Data with ``clusters`` well-separated groups in the support of family ``name`` (the family's
    own ``example_data``)."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(clusters, (N,), generator=g)
    return pm.get_family(name).example_data(labels, clusters, D, g)


def four_blobs(n=4000):
    """``n`` items in 2-D from 4 unit-variance blobs 12 apart (seeded), and their labels."""
    g = torch.Generator().manual_seed(5)
    labels = torch.randint(4, (n,), generator=g)
    centers = torch.tensor([[0.0, 0.0], [12.0, 0.0], [0.0, 12.0], [12.0, 12.0]], dtype=torch.float64)
    return centers[labels] + torch.randn(n, 2, generator=g, dtype=torch.float64), labels


@pytest.fixture(params=FAMILY_NAMES)
def family_name(request):
    return request.param
