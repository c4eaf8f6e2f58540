"""The GPU path (issue #17): with a CUDA device the globals, the memo and every batch (moved there batch by
batch) live on the GPU, and the fits agree with the CPU fits. Skipped where torch sees no GPU."""

import numpy as np
import pytest
import torch

import pyro_memo as pm
from pyro_memo.data import Graph, toy_patches
from pyro_memo.relational import MemoizedRelational
from pyro_memo.synthetic import bars_corpus
from pyro_memo.topics import MemoizedHDP

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def test_a_dp_mixture_read_from_disk_on_the_gpu_tracks_the_cpu_fit(tmp_path):
    x = toy_patches(3000, seed=0, patch=3, num_components=5)[0]
    np.save(tmp_path / "x.npy", x)
    fits = {}
    for device, local in (("cpu", None), ("cuda", None), ("cuda", "float32")):
        family = pm.ZeroMeanGaussian.from_data(x, device=device)
        fit = pm.MemoizedVB(family, 6, laps=5, tol=0, seed=0, local_dtype=local).fit(str(tmp_path / "x.npy"), 6)
        assert fit.posterior.eta1.device.type == device
        fits[device, local] = np.asarray(fit.elbo_trace)
    np.testing.assert_allclose(fits["cuda", None], fits["cpu", None], rtol=1e-9)
    np.testing.assert_allclose(fits["cuda", "float32"], fits["cpu", None], rtol=1e-4)


def test_the_hdp_and_the_relational_model_on_the_gpu_track_the_cpu_fits():
    corpus, _, _ = bars_corpus(60, 30, seed=1)
    rng = np.random.default_rng(1)
    pairs = np.array([(i, j) for i in range(30) for j in range(i + 1, 30)])
    graph = Graph(pairs[rng.random(len(pairs)) < 0.2], 30)
    for make, data in ((lambda d: MemoizedHDP(K=5, laps=3, tol=0, seed=1, device=d), corpus),
                       (lambda d: MemoizedRelational(K=3, laps=3, tol=0, seed=1, device=d), graph)):
        cpu, gpu = make("cpu").fit(data, 3), make("cuda").fit(data, 3)
        np.testing.assert_allclose(gpu.elbo_trace, cpu.elbo_trace, rtol=1e-7)


def test_the_gpu_forms_packed_outer_products_and_their_statistics_as_the_cpu_does():
    from pyro_memo.families.base import outer_product_stats, packed_outer

    x = torch.randn(3000, 64, dtype=torch.float64)
    resp = torch.softmax(torch.randn(3000, 7, dtype=torch.float64), -1)
    assert torch.equal(packed_outer(x.cuda()).cpu(), packed_outer(x))
    torch.testing.assert_close(outer_product_stats(x.cuda(), resp.cuda()).cpu(), outer_product_stats(x, resp),
                               rtol=1e-12, atol=1e-12)
