"""MemoizedELBO counts every item once: a call on the whole data after batched steps is scored by its own
summary (``svi.evaluate_loss(data)``), batches that are not fixed are refused, and ClosedFormOptimizer
refuses gradients from another loss before moving any parameter. For the DP, HDP and relational guides."""

import re

import pyro
import pytest
import torch
from pyro.infer import SVI, Trace_ELBO

import pyro_memo as pm
from pyro_memo.models import HDPRelationalModel
from tests.bridge.test_hdp_bridge import corpus, topic_model
from tests.bridge.test_memoized_elbo import model as dp_model
from tests.bridge.test_relational_svi import random_pairs


def dp_case(seed):
    """``(model, guide, call(batch) -> args, batch splits)`` for a DP mixture on 240 points."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.tensor([[4.0, 0.0], [-4.0, 0.0], [0.0, 5.0]])
    data = torch.cat([c + torch.randn(80, 2, generator=g) for c in centers])
    return dp_model, pm.DPMixtureGuide(dp_model, K=4, seed=seed), lambda b: (data, b), len(data)


def hdp_case(seed):
    doc_of, words, D, V = corpus(10 + seed, D=12)
    return topic_model, pm.HDPGuide(topic_model, seed=seed), lambda b: (doc_of, words, D, V, b), D


def relational_case(seed):
    src, dst, y = random_pairs(seed, N=20)
    model = HDPRelationalModel(20, 3, alpha=0.5)
    guide = pm.RelationalGuide(model, prefix="rel", seed=seed)
    return model, guide, lambda nodes: (src, dst, y, None if nodes is None else pm.batch_pairs(src, dst, nodes)), 20


CASES = {"dp": dp_case, "hdp": hdp_case, "relational": relational_case}


def splits(n, seed, parts=3):
    return list(torch.randperm(n, generator=torch.Generator().manual_seed(seed)).chunk(parts))


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("seed", range(3))
def test_the_whole_data_loss_after_batched_steps_counts_every_item_once(kind, seed):
    pyro.clear_param_store()
    model, guide, call, n = CASES[kind](seed)
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    batches = splits(n, seed)
    losses = [svi.step(*call(b)) for _ in range(6) for b in batches]
    whole = svi.evaluate_loss(*call(None))
    # refreshing every batch's local step under the same globals is a coordinate step on the memo's
    # bound, so the whole-data loss is at most the memo's; counting the data twice would double it
    memo_loss = -float(guide.posterior_for(*call(None)).elbo(guide.memo.total) if kind == "relational"
                       else guide.posterior.elbo(guide.memo.total))
    assert whole <= memo_loss + 1e-9 * abs(memo_loss)
    assert whole == pytest.approx(losses[-1], rel=0.05)
    # the memo is unchanged, and a step on the whole data replaces the batches' summaries by its own
    assert len(guide.memo.batches) == len(batches)
    svi.step(*call(None))
    assert len(guide.memo.batches) == 1
    # the next batch starts the memo again (held, like a first lap) instead of counting items twice
    svi.step(*call(batches[0]))
    assert len(guide.memo.batches) == 1


@pytest.mark.parametrize("kind", CASES)
def test_batches_drawn_afresh_every_lap_are_refused(kind):
    pyro.clear_param_store()
    model, guide, call, n = CASES[kind](0)
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    for b in splits(n, 0):
        svi.step(*call(b))
    moved = splits(n, 1)[0]
    before = {name: value.detach().clone() for name, value in pyro.get_param_store().items()}
    for method in (svi.step, svi.evaluate_loss):
        with pytest.raises(ValueError, match="needs fixed batches: this batch's .* new index set"):
            method(*call(moved))
    assert all(torch.equal(pyro.param(name).detach(), value) for name, value in before.items())


@pytest.mark.parametrize("kind", CASES)
def test_a_partial_batch_over_a_whole_data_memo_is_not_scored_twice(kind):
    pyro.clear_param_store()
    model, guide, call, n = CASES[kind](0)
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    batches = splits(n, 0)
    svi.step(*call(batches[1]))
    svi.step(*call(None))
    with pytest.raises(ValueError, match="one summary of the whole data"):
        svi.evaluate_loss(*call(batches[0]))


def test_closed_form_optimizer_refuses_gradients_of_another_loss_before_moving_anything():
    pyro.clear_param_store()
    model, guide, call, n = dp_case(0)
    guide.setup(*call(None))
    before = {name: value.detach().clone() for name, value in pyro.get_param_store().items()}
    svi = SVI(model, pyro.infer.config_enumerate(guide), pm.ClosedFormOptimizer(), Trace_ELBO())
    with pytest.raises(ValueError, match="ClosedFormOptimizer applies the closed-form update .* another loss"):
        svi.step(*call(None))
    assert all(torch.equal(pyro.param(name).detach(), value) for name, value in before.items())
    # the same optimizer still runs MemoizedELBO, and a later foreign step is refused again
    memo = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    assert torch.isfinite(torch.tensor(memo.step(*call(None))))
    with pytest.raises(ValueError, match="another loss"):
        svi.step(*call(None))


@pytest.mark.parametrize("kind", CASES)
def test_a_guide_set_up_on_the_whole_data_reads_the_batches_of_later_calls(kind):
    """The first call passes no batch; the guide reads the model again when a call adds one, so the
    later steps are memoized batches, not whole-data steps."""
    pyro.clear_param_store()
    model, guide, call, n = CASES[kind](0)
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    svi.evaluate_loss(*call(None))
    batches = splits(n, 0)
    for b in batches:
        svi.step(*call(b))
    assert len(guide.memo.batches) == len(batches)


@pytest.mark.parametrize("bad, named", [
    (lambda data, batch: (data.numpy(), batch), "'data' is a numpy array"),
    (lambda data, batch: (data, batch.numpy()), "'batch' is a numpy array"),
    (lambda data, batch: (data, batch.tolist()), "'batch' is a list"),
    (lambda data, batch: (data, batch[:0]), "'batch' is empty"),
])
def test_an_svi_step_on_arguments_that_are_no_tensors_or_empty_names_the_argument(bad, named):
    """A step whose trace fails on a numpy array, a list or an empty batch names that argument in its
    ModelStructureError (the cause read "float division by zero" or "'numpy.ndarray' object has no
    attribute 'dim'")."""
    model, guide, call, n = dp_case(0)
    data, batch = call(torch.arange(10))
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    pyro.clear_param_store()
    with pytest.raises(pm.ModelStructureError, match=named):
        svi.step(*bad(data, batch))


BATCH_ARGUMENT = {"dp": "'batch' (the subsample of plate 'data')", "hdp": "'docs' (the subsample of plate 'doc_plate')",
                  "relational": "'batch' (the subsample of plate 'pairs')"}


@pytest.mark.parametrize("kind", CASES)
@pytest.mark.parametrize("bad, found", [
    (torch.tensor([[0, 1], [2, 3]]), r"shape \(2, 2\), dtype torch.int64"),
    (torch.tensor([0.0, 1.0]), r"shape \(2,\), dtype torch.float32"),
    (torch.tensor([0.5, 1.0]), r"shape \(2,\), dtype torch.float32"),
    (torch.tensor([True, False]), r"shape \(2,\), dtype torch.bool"),
    (torch.tensor(3), r"shape \(\), dtype torch.int64"),
])
@pytest.mark.parametrize("after_a_step", [False, True])
def test_a_batch_that_is_no_1d_integer_tensor_is_named_with_its_shape_and_dtype(kind, bad, found, after_a_step):
    """A batch of another shape or dtype is refused naming the model's argument, its plate, and the shape and
    dtype found: on a guide's first call (recognition read a 2-D batch as rows and reported "no argument
    matches the value of observed site 'x'", a float one the model's own IndexError) and on a later step
    (where a float batch was truncated to other ids and a bool one read as the ids 1 and 0: a silent wrong
    step), for DP mixtures, HDP topics and relational models alike."""
    pyro.clear_param_store()
    model, guide, call, n = CASES[kind](0)
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    args = call(splits(n, 0)[0])
    if after_a_step:
        svi.step(*args)
    before = {name: value.detach().clone() for name, value in pyro.get_param_store().items()}
    args = args[:-1] + (bad,)
    message = rf"the model's argument {re.escape(BATCH_ARGUMENT[kind])} must be a 1-D integer tensor of ids .*{found}"
    for method in (svi.step, svi.evaluate_loss, guide):
        with pytest.raises(ValueError, match=message):
            method(*args)
    assert all(torch.equal(pyro.param(name).detach(), value) for name, value in before.items())


@pytest.mark.parametrize("kind", CASES)
def test_batch_ids_outside_the_plate_are_named_on_the_first_call(kind):
    """Ids outside ``[0, size)`` read "index 1000000 is out of bounds" from the model's own trace, a negative
    one passed recognition and, in a guide called outside SVI, wrapped around to the last items."""
    pyro.clear_param_store()
    model, guide, call, n = CASES[kind](0)
    args = call(splits(n, 0)[0])[:-1]
    for bad in (torch.tensor([0, 10**6]), torch.tensor([-1, 0])):
        with pytest.raises(ValueError, match=rf"argument {re.escape(BATCH_ARGUMENT[kind])} must lie in \[0, "):
            SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO()).step(*args, bad)
    guide.setup(*call(splits(n, 0)[0]))
    with pytest.raises(ValueError, match=rf"argument {re.escape(BATCH_ARGUMENT[kind])} must be non-negative"):
        guide(*args, torch.tensor([-1, 0]))


@pytest.mark.parametrize("kind", CASES)
def test_fixed_batches_that_overlap_are_refused_before_their_shared_items_count_twice(kind):
    """Batches ``[n/2, n)`` and ``[n/4, 3n/4)``: together they hold n ids, so the memo read as complete and the globals
    moved on a summary that counted ``[n/2, 3n/4)`` twice and never saw ``[0, n/4)``, silently, every lap (a relational
    model's batches of nodes: their pairs)."""
    pyro.clear_param_store()
    model, guide, call, n = CASES[kind](0)
    svi = SVI(model, guide, pm.ClosedFormOptimizer(), pm.MemoizedELBO())
    first, overlapping = torch.arange(n // 2, n), torch.arange(n // 4, n // 4 + n // 2)  # (nodes: fewer pairs)
    svi.step(*call(first))
    for evaluate in (svi.evaluate_loss, svi.step):
        with pytest.raises(ValueError, match=r"needs fixed batches that partition the data: this batch's \d+ \w+ "
                                             r"share \d+ with the 1 batches seen before \(first: \d+\)"):
            evaluate(*call(overlapping))
    rest = torch.arange(0, n // 2)  # the disjoint batches go on
    assert all(torch.isfinite(torch.tensor(svi.step(*call(b)))) for b in (rest, first, rest))
