"""A hand-written Pyro HDP topic model (other site and plate names than pyro_memo's) is recognised,
fitted by fit_memoized and by SVI + MemoizedELBO, and Pyro's Trace_ELBO of the fitted guide equals
the exact bound plus the closed-form normaliser gap."""

import math

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F
from pyro.ops.indexing import Vindex

import pyro_memo as pm
from pyro_memo.bridge.hdp_gap import normaliser_gap

K, ALPHA, GAMMA, LAM0 = 4, 0.6, 3.0, 0.2


def weights(u):
    """Stick-breaking over K + 1 cells, written independently of pyro_memo."""
    return F.pad(u, (0, 1), value=1) * F.pad((1 - u).cumprod(-1), (1, 0), value=1)


def topic_model(doc_of, words, D, V, docs=None):
    """HDP topic model; ``docs`` subsamples the document plate (a batch of documents)."""
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(torch.tensor(1.0), torch.tensor(GAMMA)))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D, subsample=docs) as d:
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b)))
    tok, local = pm.batch_tokens(doc_of, d, D)
    with pyro.plate("word_plate", len(doc_of), subsample=tok):
        c = pyro.sample("c", dist.Categorical(theta[local]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words[tok])


def plain_topic_model(doc_of, words, D, V):
    """No subsampling; the token plate is the corpus' tokens. Written to run under Pyro's
    vectorised particles (batch dimensions on the left)."""
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b).unsqueeze(-2)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[..., doc_of, :]))
        pyro.sample("w", dist.Categorical(Vindex(topic.unsqueeze(-3))[..., c, :]), obs=words)


def corpus(seed, D=12, V=10, length=15):
    """Tokens of D documents, each mixing two of three word-block topics."""
    g = torch.Generator().manual_seed(seed)
    blocks = torch.zeros(3, V)
    for k in range(3):
        blocks[k, k * (V // 3):(k + 1) * (V // 3) + 1] = 1.0
    blocks = blocks / blocks.sum(1, keepdim=True)
    doc_of, words = [], []
    for d in range(D):
        mix = 0.5 * blocks[d % 3] + 0.5 * blocks[(d + 1) % 3]
        n = length + int(torch.randint(5, (1,), generator=g))
        doc_of.append(torch.full((n,), d))
        words.append(torch.multinomial(mix, n, replacement=True, generator=g))
    return torch.cat(doc_of), torch.cat(words), D, V


def test_hdp_model_is_recognised_with_its_names_and_hyperparameters():
    doc_of, words, D, V = corpus(0)
    spec = pm.recognize_model(topic_model, doc_of, words, D, V)
    assert spec.kind == "hdp"
    assert (spec.K, spec.V, spec.num_docs, spec.num_tokens) == (K, V, D, len(doc_of))
    assert spec.alpha == pytest.approx(ALPHA) and spec.gamma == pytest.approx(GAMMA)
    assert spec.lam0 == pytest.approx(LAM0)
    assert (spec.stick_site, spec.topic_site, spec.doc_site, spec.assignment_site, spec.obs_site) == \
        ("b", "topic", "theta", "c", "w")
    assert (spec.doc_plate, spec.token_plate, spec.doc_arg, spec.word_arg) == \
        ("doc_plate", "word_plate", ("arg", 0), ("arg", 1))
    batch = torch.tensor([7, 2, 5])
    spec = pm.recognize_model(topic_model, doc_of, words, D, V, batch)
    assert spec.subsample_arg == ("arg", 4) and spec.token_subsampled
    assert torch.equal(spec.batch_indices((doc_of, words, D, V, batch), {}), batch)
    # a DP mixture still gets a DP spec
    dp = pm.recognize_model(pm.DPMixtureModel(pm.Multinomial({"lam": torch.ones(3)}), T=3),
                            torch.eye(3)[torch.tensor([0, 1, 2, 1])])
    assert dp.kind == "dp"


def wrong_document_prior(doc_of, words, D, V):
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b).flip(-1)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words)


def wrong_token_documents(doc_of, words, D, V):
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[0].expand(len(doc_of), K + 1)))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words)


def wrong_word_topics(doc_of, words, D, V):
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[(c + 1) % (K + 1)]), obs=words)


def asymmetric_topics(doc_of, words, D, V):
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.linspace(0.1, 1.0, V)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words)


def poisson_words(doc_of, words, D, V):
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    with pyro.plate("topic_plate", K + 1):
        rate = pyro.sample("rate", dist.Gamma(1.0, 1.0))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Poisson(rate[c]), obs=words.float())


def logistic_topics(doc_of, words, D, V):
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    with pyro.plate("topic_plate", K + 1):
        logits = pyro.sample("logits", dist.Normal(torch.zeros(V), 1.0).to_event(1))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(logits=logits[c]), obs=words)


def subsampled_sticks(doc_of, words, D, V):
    """Recognition read the sticks' subsample size (2) as K and blamed the topics: "topic site 'topic' must be in
    a plate of size K + 1 = 3 (the assignment's categories); its plate 'topic_plate' has size 5"."""
    with pyro.plate("top_sticks", K, subsample_size=2):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words)


def subsampled_topics(doc_of, words, D, V):
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    with pyro.plate("topic_plate", K + 1, subsample_size=2):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c.clamp(max=1)]), obs=words)


def sequential_topics(doc_of, words, D, V):
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    topic = torch.stack([pyro.sample(f"topic_{k}", dist.Dirichlet(torch.full((V,), LAM0)))
                         for k in pyro.plate("topic_plate", K + 1)])
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b)))
    with pyro.plate("word_plate", len(doc_of)):
        c = pyro.sample("c", dist.Categorical(theta[doc_of]))
        pyro.sample("w", dist.Categorical(topic[c]), obs=words)


def bag_of_words(doc_of, words, D, V):
    """Each document's word counts drawn at once, the topic assignments summed out (no token plate)."""
    counts = torch.zeros(D, V).index_put_((doc_of, words), torch.ones(len(doc_of)), accumulate=True)
    with pyro.plate("top_sticks", K):
        b = pyro.sample("b", dist.Beta(1.0, GAMMA))
    with pyro.plate("topic_plate", K + 1):
        topic = pyro.sample("topic", dist.Dirichlet(torch.full((V,), LAM0)))
    with pyro.plate("doc_plate", D):
        theta = pyro.sample("theta", dist.Dirichlet(ALPHA * weights(b)))
        pyro.sample("w", dist.Multinomial(int(counts.sum(-1).max()), theta @ topic), obs=counts)


@pytest.mark.parametrize("model,message", [
    (sequential_topics, r"site 'topic_0' sits in the sequential plate 'topic_plate' .*`with "
                        r"pyro.plate\('topic_plate', 5\): topic = pyro.sample\('topic', ...\)`"),
    (subsampled_sticks, r"stick site 'b' sits in plate 'top_sticks' subsampled to 2 of its 4 .*keep plate "
                        r"'top_sticks' whole"),
    (subsampled_topics, r"topic site 'topic' sits in plate 'topic_plate' subsampled to 2 of its 5 .*batches only "
                        r"the documents \(plate 'doc_plate'\)"),
    (wrong_document_prior, r"document-weight site 'theta'.*alpha \* beta.*site 'b'"),
    (wrong_token_documents, r"assignment site 'c'.*pi\[doc\] of site 'theta'.*Supported HDP form"),
    (wrong_word_topics, r"observed site 'w'.*log phi\[z, word\].*'topic'"),
    (asymmetric_topics, r"topic site 'topic'.*symmetric Dirichlet"),
    (poisson_words, r"observed site 'w' is Poisson.*Categorical\(phi\[z\]\).*Supported HDP form"),
    (bag_of_words, r"observed site 'w' \(Multinomial\) draws each document of plate 'doc_plate' from its topic "
                   r"weights 'theta'.*one latent Categorical topic assignment per token.*z = pyro.sample\('z', "
                   r"dist.Categorical\(pi\[doc\]\)\).*Categorical\(phi\[z\]\), obs=word\)"),
    (logistic_topics, r"two Dirichlet sites besides the sticks.*'logits': 'Normal'.*Supported HDP form"),
])
def test_non_hdp_structures_raise_named_errors(model, message):
    doc_of, words, D, V = corpus(0)
    with pytest.raises(pm.ModelStructureError, match=message):
        pm.recognize_model(model, doc_of, words, D, V)


def test_dp_guide_refuses_an_hdp_model():
    doc_of, words, D, V = corpus(0)
    with pytest.raises(pm.ModelStructureError, match="HDPGuide"):
        pm.DPMixtureGuide(plain_topic_model).setup(doc_of, words, D, V)


def test_fit_memoized_fits_a_hand_written_hdp_model():
    doc_of, words, D, V = corpus(1)
    pyro.clear_param_store()
    result = pm.fit_memoized(plain_topic_model, doc_of, words, D, V, num_batches=3, laps=8, seed=0)
    assert isinstance(result.guide, pm.HDPGuide) and len(result.elbo_trace) >= 2
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(result.elbo_trace[1:], result.elbo_trace[2:], strict=False))
    # the same fit through the corpus API (the model's float32 hyperparameters, as recognised)
    spec = pm.recognize_model(plain_topic_model, doc_of, words, D, V)
    counts = np.zeros((D, V))
    np.add.at(counts, (doc_of.numpy(), words.numpy()), 1)
    direct = pm.topics.MemoizedHDP(K=K, alpha=spec.alpha, gamma=spec.gamma, lam0=spec.lam0, laps=8, seed=0).fit(
        pm.topics.from_counts(counts), 3)
    assert result.elbo_trace == pytest.approx(direct.elbo_trace, rel=1e-12)
    # the guide's globals are in Pyro's param store
    torch.testing.assert_close(pyro.param(f"{result.guide.prefix}.lam").detach(), direct.posterior.lam)
    torch.testing.assert_close(result.posterior.rho, direct.posterior.rho)
    # the guide's bound re-optimises every document under the final globals
    assert result.elbo >= result.elbo_trace[-1] - 1e-6 * abs(result.elbo_trace[-1])
    with pytest.raises(ValueError, match="truncation is its own"):
        pm.fit_memoized(plain_topic_model, doc_of, words, D, V, K=K + 2)
    with pytest.raises(ValueError, match="K must be a positive integer"):  # was truncated to K before
        pm.fit_memoized(plain_topic_model, doc_of, words, D, V, K=K + 0.5)
    with pytest.raises(ValueError, match="shuffle=False"):
        pm.fit_memoized(plain_topic_model, doc_of, words, D, V, shuffle=False)


def test_trace_elbo_of_the_fitted_guide_is_the_bound_plus_the_normaliser_gap():
    doc_of, words, D, V = corpus(2, D=6, V=8, length=8)
    pyro.clear_param_store()
    result = pm.fit_memoized(plain_topic_model, doc_of, words, D, V, num_batches=2, laps=6, seed=1)
    pyro.set_rng_seed(0)
    elbo = pyro.infer.Trace_ELBO(num_particles=3000, vectorize_particles=True, max_plate_nesting=1)
    estimates = [-elbo.loss(plain_topic_model, result.guide, doc_of, words, D, V) for _ in range(10)]
    mean, se = np.mean(estimates), np.std(estimates, ddof=1) / math.sqrt(len(estimates))
    assert result.normaliser_gap > 0
    assert abs(mean - (result.elbo + result.normaliser_gap)) < 3 * se
    # without the gap the two disagree: the check can fail
    assert abs(mean - result.elbo) > 3 * se


def test_closed_form_gap_matches_monte_carlo():
    torch.manual_seed(0)
    rho = torch.tensor([0.3, 0.5, 0.2, 0.6], dtype=torch.float64)
    omega = torch.tensor([5.0, 12.0, 3.0, 30.0], dtype=torch.float64)
    for alpha in (0.4, 2.0):
        u = dist.Beta(rho * omega, (1 - rho) * omega).sample((200_000,))
        beta = weights(u)
        a = torch.tensor(alpha, dtype=torch.float64)
        draws = 3 * (torch.lgamma(a) - torch.lgamma(a * beta).sum(1) - len(rho) * torch.log(a)
                     - torch.log(beta).sum(1))
        se = float(draws.std()) / math.sqrt(len(draws))
        assert abs(normaliser_gap(rho, omega, alpha, 3) - float(draws.mean())) < 3 * se


@pytest.mark.parametrize("seed", range(3))
def test_svi_with_memoized_elbo_over_document_batches_never_rises_after_lap_1(seed):
    doc_of, words, D, V = corpus(10 + seed, D=9 + 3 * seed)
    pyro.clear_param_store()
    guide = pm.HDPGuide(topic_model, seed=seed)
    svi = pyro.infer.SVI(topic_model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    batches = list(torch.randperm(D, generator=torch.Generator().manual_seed(seed)).split(4))
    losses = []
    for _ in range(5):
        for batch in batches:
            losses.append(svi.step(doc_of, words, D, V, batch))
    later = losses[len(batches) - 1:]
    assert all(b <= a + 1e-9 * abs(a) for a, b in zip(later, later[1:], strict=False))
    assert later[-1] < later[0]
    # the loss is minus the HDP bound of the memo (every document counted once) before the
    # step's global update, which cannot lower it
    assert guide.memo.total.num_docs == D
    bound = float(guide.posterior.elbo(guide.memo.total))
    assert -losses[-1] <= bound + 1e-9 * abs(bound)
    # loss() evaluates without changing the memo or the stored local parameters
    counts = guide.doc_topic_counts.clone()
    pm.MemoizedELBO().loss(topic_model, guide, doc_of, words, D, V, batches[0])
    assert torch.equal(guide.doc_topic_counts, counts)


def test_pyro_memos_hdp_model_names_tokens_it_cannot_take_and_truncations_it_would_round():
    # no tokens raised torch's 'max(): Expected reduction dim ...', 2-D ids a plate shape mismatch; K=2.5 became 2,
    # K=True 1, alpha=inf passed
    doc_of, words, _, V = corpus(0)
    model = pm.models.HDPTopicModel(V, 3)
    for doc, word in ((doc_of[:0], words[:0]), (doc_of[None], words[None])):
        with pytest.raises(pm.ModelStructureError, match=r"doc must be a non-empty 1-D array.*got shape"):
            pm.fit_memoized(model, doc, word, num_batches=2, laps=2)
    for kwargs, message in (({"K": 2.5}, "K must be a positive integer"), ({"K": True}, "K must be a positive"),
                            ({"V": "x"}, "V must be a positive integer"),
                            ({"alpha": float("inf")}, "alpha must be positive and finite")):
        with pytest.raises(ValueError, match=message):
            pm.models.HDPTopicModel(**{"V": V, "K": 3, **kwargs})


DOCS = r"the model's argument 'docs' \(the subsample of plate 'doc_plate'\)"


@pytest.mark.parametrize("batch,message,step_message", [
    ([0, 20], r"batch of documents must lie in \[0, 12\); found \[0, 20\]",  # an IndexError before
     DOCS + r" must lie in \[0, 12\); found \[0, 20\]"),
    ([0, -1], r"batch of documents must lie in \[0, 12\)",  # took the last document's tokens silently
     DOCS + r" must lie in \[0, 12\)"),
    ([0, 0, 1], r"batch of documents lists an id more than once", None),  # dropped document 0's tokens silently
    ([0.5], r"must be whole-number ids",  # truncated to document 0
     DOCS + r" must be a 1-D integer tensor of ids .*dtype torch.float32"),
    ([[0, 1]], r"must be a 1-D array of ids", None),
])
def test_batch_tokens_refuses_a_bad_batch_of_documents(batch, message, step_message):
    """``batch_tokens`` refuses a bad batch; an SVI step on it is refused too, naming the model's batch
    argument where the plate's subsample is that argument (batch_tokens' own message otherwise)."""
    doc_of, words, D, V = corpus(0)
    with pytest.raises(ValueError, match=message):
        pm.batch_tokens(doc_of, torch.tensor(batch), D)
    if batch != [[0, 1]]:  # the same error from an SVI step on the batch
        guide = pm.HDPGuide(topic_model, prefix="bad_batch")
        svi = pyro.infer.SVI(topic_model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
        with pytest.raises(ValueError, match=step_message or message):
            svi.step(doc_of, words, D, V, torch.tensor(batch))


def test_batch_tokens_refuses_documents_beyond_num_docs():
    doc_of, _, _, _ = corpus(0)
    with pytest.raises(ValueError, match=r"doc \(each token's document id\) must lie in \[0, 3\); found \[0, 11\]"):
        pm.batch_tokens(doc_of, torch.tensor([0]), 3)  # an IndexError before
