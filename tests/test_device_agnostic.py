"""Data on CUDA keeps the Pyro bridge's computation on CUDA: the HDP and relational guides, the bundled
models and the DP-mixture fits run with "cuda" data under a stand-in CUDA device (:mod:`tests.fake_cuda`)
without mixing devices, and their param-store values are on the data's device."""

import math

import pyro
import pyro.distributions as dist
import pytest
import torch

import pyro_memo as pm
from pyro_memo.models import DPMixtureModel, HDPRelationalModel, HDPTopicModel
from tests.bridge.test_hdp_bridge import corpus, weights
from tests.bridge.test_relational_svi import random_pairs
from tests.fake_cuda import fake_cuda

pytestmark = pytest.mark.filterwarnings("ignore::pyro_memo.ConvergenceWarning")


@pytest.fixture(autouse=True)
def clean_param_store():
    pyro.clear_param_store()
    yield
    pyro.clear_param_store()


def assert_on_cuda(recorder):
    """No device mix was recorded and the guide's param-store values are on the (stand-in) CUDA device
    (the data's fingerprint, a checksum, is bookkeeping kept on the CPU)."""
    assert not recorder.mixes, str(recorder)
    devices = {name: str(v.device) for name, v in pyro.get_param_store().items() if not name.endswith(".fingerprint")}
    assert devices and devices == dict.fromkeys(devices, "cuda:0")


def batched_topic_model(doc_of, words, D, V, docs=None):
    """A device-agnostic HDP topic model whose ``docs`` subsample the document plate."""
    one = torch.ones((), dtype=torch.float64, device=words.device)
    with pyro.plate("top_sticks", 4):
        b = pyro.sample("b", dist.Beta(one, 3.0 * one))
    with pyro.plate("topic_plate", 5):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), 0.2, dtype=torch.float64, device=words.device)))
    with pyro.plate("doc_plate", D, subsample=docs) as d:
        theta = pyro.sample("theta", dist.Dirichlet(0.6 * weights(b)))
    tok, local = pm.batch_tokens(doc_of, d, D)
    with pyro.plate("word_plate", len(doc_of), subsample=tok):
        c = pyro.sample("c", dist.Categorical(theta[local]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words[tok])


def test_the_stand_in_device_records_a_mix_and_restores_torch_cuda():
    available = torch.cuda.is_available()
    with fake_cuda() as recorder:
        x = torch.ones(3).to("cuda")
        assert x.device.type == "cuda" and (2 * x).device.type == "cuda" and torch.cuda.is_available()
        x + torch.ones(3)
    assert [kind for kind, _, _ in recorder.mixes] == ["cpu tensor mixed with a cuda tensor"]
    assert torch.cuda.is_available() == available


def test_fit_memoized_of_the_bundled_hdp_topic_model_runs_on_the_tokens_device():
    doc, words, D, V = corpus(0)
    cpu = pm.fit_memoized(HDPTopicModel(V, 4), doc, words, D, num_batches=2, laps=2).elbo
    pyro.clear_param_store()
    with fake_cuda() as recorder:
        fit = pm.fit_memoized(HDPTopicModel(V, 4), doc.cuda(), words.cuda(), D, num_batches=2, laps=2)
    assert_on_cuda(recorder)
    assert fit.guide.doc_topic_counts.device.type == "cuda"
    assert fit.elbo == pytest.approx(cpu, rel=1e-9)


def test_svi_with_the_hdp_guide_runs_on_the_tokens_device():
    doc, words, D, V = corpus(0)
    with fake_cuda() as recorder:
        doc, words = doc.cuda(), words.cuda()
        guide = pm.HDPGuide(batched_topic_model)
        svi = pyro.infer.SVI(batched_topic_model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
        for batch in torch.arange(D, device="cuda").split(6):
            svi.step(doc, words, D, V, batch)
        loss = pyro.infer.Trace_ELBO().loss(batched_topic_model, guide, doc, words, D, V)
    assert_on_cuda(recorder)
    assert math.isfinite(loss)


def test_svi_with_the_relational_guide_on_the_bundled_model_runs_on_the_pairs_device():
    src, dst, y = random_pairs(0, N=12, drop=0.1)
    with fake_cuda() as recorder:
        src, dst, y = src.cuda(), dst.cuda(), y.cuda()
        model = HDPRelationalModel(12, 3)
        guide = pm.RelationalGuide(model)
        svi = pyro.infer.SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
        for nodes in torch.arange(12, device="cuda").chunk(2):
            svi.step(src, dst, y, pm.batch_pairs(src, dst, nodes))
        bound = guide.elbo(src, dst, y)
        loss = pyro.infer.Trace_ELBO().loss(model, guide, src, dst, y)
        links = pyro.infer.Predictive(model, guide=guide, num_samples=2, return_sites=["y"])(src, dst)["y"]
    assert_on_cuda(recorder)
    assert math.isfinite(bound) and math.isfinite(loss) and links.device.type == "cuda"


def test_fit_vb_of_the_bundled_dp_mixture_runs_on_the_data_device():
    x = torch.cat([torch.randn(40, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64) + s
                   for s in (-3.0, 3.0)])
    with fake_cuda() as recorder:
        x = x.cuda()
        model = DPMixtureModel(pm.Gaussian.from_data(x, device=x.device), T=4)
        fit = pm.fit_vb(model, x, max_iter=5)
        loss = pyro.infer.Trace_ELBO().loss(model, fit.guide, x)
    assert_on_cuda(recorder)
    assert math.isfinite(fit.elbo) and math.isfinite(loss)


def test_a_dp_checkpoint_with_a_pending_birth_resumes_on_the_device_it_is_loaded_to(tmp_path):
    """The pending birth's summary stayed on the CPU when load_state put the rest of the state on the GPU: its
    adoption failed there (torch.cat of CPU and CUDA tensors)."""
    x = torch.cat([torch.randn(150, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
                   + torch.tensor(s, dtype=torch.float64) for s in ([0.0, 0.0], [6.0, 0.0], [0.0, 6.0])])
    family = pm.Gaussian.from_data(x)
    first = pm.MemoizedVB(family, 1, laps=1, tol=0, seed=2, moves="birth").fit(x, num_batches=3)
    assert first.state.move_states["birth"]["pending"] is not None
    pm.save_state(tmp_path / "state.pt", first.state)
    with fake_cuda() as recorder:
        state = pm.load_state(tmp_path / "state.pt", device="cuda")
        fit = pm.MemoizedVB(pm.Gaussian.from_data(x, device="cuda"), 1, laps=2, tol=0, seed=2,
                            moves="birth").fit(x.cuda(), num_batches=3, state=state)
    assert not recorder.mixes, str(recorder)
    assert fit.state.move_log[1]["birth"]["proposed"] == 1 and fit.posterior.K > 1
