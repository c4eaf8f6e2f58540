"""Memoized inference as a Pyro ELBO: ``SVI(model, guide, ClosedFormOptimizer(), MemoizedELBO())``."""

from typing import NamedTuple

import pyro
import torch
from pyro.infer import ELBO

from ..inference import DPMixturePosterior
from ..memo import SummaryCache
from .closed_form_optimizer import mark_closed_form, take_pending
from .guide import DPMixtureGuide
from .hdp_guide import HDPGuide
from .param_store import same_model
from .relational_guide import RelationalGuide
from .structure import batch_key, check_subsample


class MemoizedELBO(ELBO):
    """The exact memoized objective of Hughes & Sudderth 2013 (eqs. 8 and 11) as a Pyro ELBO.

    Each call runs the exact local step on the model's current batch (the data plate's
    subsample indices, passed to the model as an argument; the whole data if the plate
    is not subsampled), swaps that batch's summary in the guide's memo, and returns the
    negative exact ELBO of the memoized whole-data summary under the current globals.
    :meth:`loss_and_grads` also writes the closed-form global update (eq. 10) as the
    parameters' gradients, which :class:`ClosedFormOptimizer` applies. Batches must be
    fixed: the same index set each time a batch is visited; a new index set that would count
    items the memo already holds raises :class:`ValueError`. A call on the whole data (no
    subsample, e.g. ``svi.evaluate_loss(data)``) is scored by its own summary, whatever batches
    the memo holds, and a step on it replaces them.

    Until every batch has been visited once the memo covers only the batches seen so
    far, so the loss is exact for the whole data from the end of the first lap on. As the
    engine's drivers do by default, the globals are held during that first lap (zero
    gradients) and updated once the memo covers every item, so the first lap is full-batch
    VB's first iteration; ``incremental_first_lap=True`` updates them after every batch.
    Each step is the exact closed-form update: :func:`~pyro_memo.fit_memoized` with
    ``overrelax=False`` takes the same steps, while its default also tries over-relaxed steps
    (:mod:`~pyro_memo.engine.overrelax`), which need the driver's view of the whole round.

    With a :class:`~pyro_memo.bridge.relational_guide.RelationalGuide` the batch is the pair plate's
    subsample (e.g. a batch of nodes' pairs, :func:`~pyro_memo.batch_pairs`),
    its summary holds the batch's links at their optimum under the globals, the non-linked pairs
    enter every evaluation in closed form, and the loss is minus the relational bound of the tied
    family (``pyro_memo.posterior.relational_tied``); the globals are held until the memo covers
    every pair the call lists.

    With an :class:`HDPGuide` the batch is the document plate's subsample (groups of
    documents), the local step is the HDP's document-level coordinate ascent warm-started from
    the documents' last visit, and the loss is minus the HDP bound (Hughes, Kim & Sudderth
    2015), which never rises after lap 1.
    """

    def __init__(self, incremental_first_lap=False):
        super().__init__(num_particles=1, max_plate_nesting=1)
        self.incremental_first_lap = bool(incremental_first_lap)

    def _move(self, guide, complete, target):
        """Write the update toward ``target()`` (the closed-form globals, computed only when used) as
        gradients, or zero gradients while the first lap is held (the memo is not ``complete``); mark
        the parameters for :class:`~pyro_memo.ClosedFormOptimizer`."""
        if self.incremental_first_lap or complete:
            guide.set_update_direction(target())
        else:
            for name in guide._names().values():
                unconstrained = pyro.param(name).unconstrained()
                unconstrained.grad = torch.zeros_like(unconstrained)
        for name in guide._names().values():
            mark_closed_form(pyro.param(name).unconstrained())

    def _get_trace(self, model, guide, args, kwargs):
        raise NotImplementedError("MemoizedELBO evaluates the ELBO in closed form; it draws no traces")

    def differentiable_loss(self, model, guide, *args, **kwargs):
        """Refused: the memoized objective is not differentiated. Its globals move by the closed-form update
        (eq. 10) that :meth:`loss_and_grads` writes as gradients; this is also what the module returned by
        ``MemoizedELBO()(model, guide)`` would call.

        :raises NotImplementedError: always, naming the supported use.
        """
        raise NotImplementedError(
            "MemoizedELBO has no differentiable loss (nor a module to train with a torch optimizer): its globals "
            "move by closed-form updates. Train with SVI(model, guide, pyro_memo.ClosedFormOptimizer(), "
            "pyro_memo.MemoizedELBO()) and svi.step(...); MemoizedELBO().loss(model, guide, ...) gives the value"
        )

    @staticmethod
    def _check(model, guide, args, kwargs):
        if not isinstance(guide, (DPMixtureGuide, HDPGuide, RelationalGuide)):
            raise TypeError(f"MemoizedELBO needs a pyro_memo.DPMixtureGuide, HDPGuide or RelationalGuide; got "
                            f"{type(guide).__name__}")
        if not same_model(guide.model, model):
            raise ValueError(f"the {type(guide).__name__} was built for a different model than the one passed to SVI")
        guide.setup(*args, **kwargs)

    @staticmethod
    def _batch(guide, args, kwargs, store):
        """The call's :class:`_Batch` from the exact local step under the current globals (an HDP
        guide keeps the batch documents' new counts only if ``store``)."""
        spec = guide.spec
        if isinstance(guide, RelationalGuide):
            posterior = guide.posterior_for(*args, **kwargs)
            key, summary, size = guide.batch_step(posterior, *args, **kwargs)
            return _Batch(posterior, key, summary, size, len(spec.pairs(args, kwargs)[0]), "pairs",
                          _flat_ids(spec.batch_indices(args, kwargs)))
        if isinstance(guide, HDPGuide):
            posterior, batch = guide.posterior, spec.batch(args, kwargs)
            saved = None if store or guide.doc_topic_counts is None else guide.doc_topic_counts.clone()
            _, summary = guide.local_step(posterior, batch)
            if not store:
                guide.doc_topic_counts = saved
            key = batch_key(spec.batch_indices(args, kwargs))
            return _Batch(posterior, key, summary, summary.num_items, spec.plate_size(args, kwargs), "documents",
                          _flat_ids(spec.batch_indices(args, kwargs)))
        size, indices, subsample_size = spec.plate_args(args, kwargs)
        if indices is None and subsample_size != size:
            raise ValueError(
                f"memoized inference needs fixed batches: pass the batch's indices to the model and use them as "
                f"pyro.plate('{spec.data_plate}', N, subsample=indices) instead of a random subsample_size"
            )
        if indices is not None:
            check_subsample(indices, size, f"the subsample of plate '{spec.data_plate}'")
        posterior = guide.posterior
        _, summary = posterior.local_step(spec.data(args, kwargs, indices))
        return _Batch(posterior, batch_key(indices), summary, summary.num_items, size, "items", _flat_ids(indices))

    def loss(self, model, guide, *args, **kwargs):
        """Negative exact memoized ELBO with the current batch's summary refreshed (the memo is unchanged).
        A call on the whole data is scored by its own summary alone, whatever batches the memo holds."""
        self._check(model, guide, args, kwargs)
        batch = self._batch(guide, args, kwargs, store=False)
        if batch.whole:
            return -float(batch.posterior.elbo(batch.summary))
        _check_fixed(guide, batch)
        return -float(batch.posterior.elbo(guide.memo.total_with(batch.key, batch.summary)))

    def loss_and_grads(self, model, guide, *args, **kwargs):
        """As :meth:`loss`, then store the batch's summary in the memo (a call on the whole data replaces
        every batch's) and set the gradients that move the globals to their closed-form optimum given the
        new memo."""
        self._check(model, guide, args, kwargs)
        _check_applied(guide)
        guide.check_data(*args, **kwargs)
        batch = self._batch(guide, args, kwargs, store=True)
        if batch.whole or _one_whole_summary(guide, batch):  # a whole-data summary has no batches to refresh
            guide.memo = SummaryCache()
            if isinstance(guide, RelationalGuide):
                guide.memo_pairs = {}
        else:
            _check_fixed(guide, batch)
        guide.memo.replace(batch.key, batch.summary)
        if batch.ids is not None:
            guide.memo.batch_ids[batch.key] = batch.ids
        if isinstance(guide, RelationalGuide):
            guide.memo_pairs[batch.key] = batch.size
        total = guide.memo.total
        self._move(guide, _held(guide) >= batch.plate_size, lambda: _optimum(guide, batch.posterior, total))
        return -float(batch.posterior.elbo(total))


def _check_applied(guide):
    """Raise :class:`ValueError` if the closed-form update the previous step wrote as gradients was left to
    an optimizer other than :class:`~pyro_memo.ClosedFormOptimizer` (e.g. ``pyro.optim.Adam``, which moves
    the globals by a learning rate, not to their optimum: a silently wrong fit); the marks are cleared, so
    that an ``SVI`` with ``ClosedFormOptimizer`` can continue from here."""
    store = pyro.get_param_store()
    pending = [name for name in guide._names().values()
               if name in store and take_pending(pyro.param(name).unconstrained())]
    if pending:
        raise ValueError(
            f"MemoizedELBO's previous step was not applied by pyro_memo.ClosedFormOptimizer: the closed-form update "
            f"it wrote as the gradient of '{pending[0]}' was stepped by another optimizer, which does not move the "
            f"globals to their optimum. Use SVI(model, guide, pyro_memo.ClosedFormOptimizer(), "
            f"pyro_memo.MemoizedELBO()); gradient optimizers such as pyro.optim.Adam go with Trace_ELBO / "
            f"TraceEnum_ELBO")


def _optimum(guide, posterior, total):
    """The globals optimal for the memo's ``total`` summary (eq. 10)."""
    if isinstance(guide, DPMixtureGuide):
        return DPMixturePosterior(posterior.family, posterior.sticks, None, None, None).update(total)
    return posterior.updated(total)


class _Batch(NamedTuple):
    """A call's batch: the globals it was summarised under, its memo key and summary, how many of the
    data's ``plate_size`` items (documents, pairs: ``unit``) it holds."""

    posterior: object
    key: str
    summary: object
    size: int
    plate_size: int
    unit: str
    #: the batch's ids (items, documents, pairs: the plate's subsample) flattened on the CPU (``_flat_ids``),
    #: ``None`` for the whole data
    ids: object = None

    @property
    def whole(self):
        """Whether the batch is the whole data."""
        return self.size >= self.plate_size


def _flat_ids(indices):
    """The plate subsample ``indices`` as one flat CPU tensor (``None`` stays ``None``)."""
    return None if indices is None else torch.as_tensor(indices).reshape(-1).cpu()


def _held(guide):
    """Items (documents; pairs) the guide's memo holds."""
    return sum(guide.memo_pairs.values()) if isinstance(guide, RelationalGuide) else guide.memo.num_items


def _one_whole_summary(guide, batch):
    """Whether the memo holds one summary, of the whole data (a call on the whole data stored it)."""
    return len(guide.memo.batches) == 1 and _held(guide) >= batch.plate_size


def _check_disjoint(guide, batch):
    """Raise :class:`ValueError` if the new ``batch`` shares ids with a batch the memo holds (when the memo knows
    every held batch's ids): overlapping fixed batches (``arange(0, 30)`` and ``arange(15, 45)`` of 60 items)
    count their shared items twice and, once they add up to the data's size, hold the memo "complete" with
    other items never seen, a silently wrong fit."""
    known = guide.memo.batch_ids
    if batch.ids is None or not known or any(key not in known for key in guide.memo.batches):
        return
    ids = batch.ids
    shared = torch.isin(ids, torch.cat([known[key] for key in guide.memo.batches]))
    if bool(shared.any()):
        raise ValueError(
            f"memoized inference needs fixed batches that partition the data: this batch's {batch.size} "
            f"{batch.unit} share {int(shared.sum())} with the {len(guide.memo.batches)} batches seen before "
            f"(first: {int(ids[shared][0])}), which would be counted twice. Split the indices once, each in one batch "
            f"(e.g. batches = torch.randperm(N).split(B) before the first lap), and visit the same batches every lap")


def _check_fixed(guide, batch):
    """Raise :class:`ValueError` if ``batch`` is a new index set that, beside the batches the memo holds,
    would count more than the data's items: its batches are not fixed, and their summaries would
    count some items twice."""
    held = _held(guide)
    if batch.key in guide.memo.batches:
        return
    if held + batch.size <= batch.plate_size:  # fits beside the memo's batches in number: are they disjoint?
        _check_disjoint(guide, batch)
        return
    if _one_whole_summary(guide, batch):
        raise ValueError(
            f"the memo holds one summary of the whole data, which this batch of {batch.size} {batch.unit} cannot "
            f"refresh: evaluate the loss on the whole data, or take a step on the batch first (the memo then "
            f"starts again from it)")
    raise ValueError(
        f"memoized inference needs fixed batches: this batch's {batch.size} {batch.unit} are a new index set, "
        f"and beside the {held} that the memo holds for the {len(guide.memo.batches)} batches seen before, "
        f"the data's {batch.plate_size} would be counted more than once. Split the indices once (e.g. "
        f"batches = torch.randperm(N).split(B) before the first lap) and visit the same batches every lap")
