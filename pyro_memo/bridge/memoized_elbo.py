"""Memoized inference as a Pyro ELBO: ``SVI(model, guide, ClosedFormOptimizer(), MemoizedELBO())``."""

import pyro
import torch
from pyro.infer import ELBO

from ..inference import DPMixturePosterior
from .guide import DPMixtureGuide
from .hdp_guide import HDPGuide
from .relational_guide import RelationalGuide
from .structure import batch_key


class MemoizedELBO(ELBO):
    """The exact memoized objective of Hughes & Sudderth 2013 (eqs. 8 and 11) as a Pyro ELBO.

    Each call runs the exact local step on the model's current batch (the data plate's
    subsample indices, passed to the model as an argument; the whole data if the plate
    is not subsampled), swaps that batch's summary in the guide's memo, and returns the
    negative exact ELBO of the memoized whole-data summary under the current globals.
    :meth:`loss_and_grads` also writes the closed-form global update (eq. 10) as the
    parameters' gradients, which :class:`ClosedFormOptimizer` applies. Batches must be
    fixed: the same index set each time a batch is visited.

    Until every batch has been visited once the memo covers only the batches seen so
    far, so the loss is exact for the whole data from the end of the first lap on. As the
    engine's drivers do by default, the globals are held during that first lap (zero
    gradients) and updated once the memo covers every item, so the first lap is full-batch
    VB's first iteration; ``incremental_first_lap=True`` updates them after every batch.
    Each step is the exact closed-form update: :func:`~pyro_memo.bridge.fit_memoized` with
    ``overrelax=False`` takes the same steps, while its default also tries over-relaxed steps
    (:mod:`~pyro_memo.engine.overrelax`), which need the driver's view of the whole round.

    With a :class:`~pyro_memo.bridge.relational_guide.RelationalGuide` the batch is the pair plate's
    subsample (e.g. a batch of nodes' pairs, :func:`~pyro_memo.bridge.relational_recognition.batch_pairs`),
    its summary holds the batch's links at their optimum under the globals, the non-linked pairs
    enter every evaluation in closed form, and the loss is minus the relational bound of the tied
    family (:mod:`pyro_memo.posterior.relational_tied`); the globals are held until the memo covers
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
        gradients, or zero gradients while the first lap is held (the memo is not ``complete``)."""
        if self.incremental_first_lap or complete:
            guide.set_update_direction(target())
            return
        for name in guide._names().values():
            unconstrained = pyro.param(name).unconstrained()
            unconstrained.grad = torch.zeros_like(unconstrained)

    def _get_trace(self, model, guide, args, kwargs):
        raise NotImplementedError("MemoizedELBO evaluates the ELBO in closed form; it draws no traces")

    @staticmethod
    def _check(model, guide, args, kwargs):
        if not isinstance(guide, (DPMixtureGuide, HDPGuide, RelationalGuide)):
            raise TypeError(f"MemoizedELBO needs a pyro_memo.DPMixtureGuide, HDPGuide or RelationalGuide; got "
                            f"{type(guide).__name__}")
        if guide.model is not model:
            raise ValueError(f"the {type(guide).__name__} was built for a different model than the one passed to SVI")
        guide.setup(*args, **kwargs)

    @staticmethod
    def _hdp_step(guide, args, kwargs, store):
        """The HDP batch's key and summary from its local step (counts stored only if ``store``)."""
        spec, posterior = guide.spec, guide.posterior
        batch = spec.batch(args, kwargs)
        saved = None if store or guide.doc_topic_counts is None else guide.doc_topic_counts.clone()
        _, summary = guide.local_step(posterior, batch)
        if not store:
            guide.doc_topic_counts = saved
        return posterior, batch_key(spec.batch_indices(args, kwargs)), summary

    @classmethod
    def _prepare(cls, model, guide, args, kwargs):
        cls._check(model, guide, args, kwargs)
        spec = guide.spec
        size, indices, subsample_size = spec.plate_args(args, kwargs)
        if indices is None and subsample_size != size:
            raise ValueError(
                f"memoized inference needs fixed batches: pass the batch's indices to the model and use them as "
                f"pyro.plate('{spec.data_plate}', N, subsample=indices) instead of a random subsample_size"
            )
        posterior = guide.posterior
        _, summary = posterior.local_step(spec.data(args, kwargs, indices))
        return guide, posterior, batch_key(indices), summary

    @classmethod
    def _relational_step(cls, model, guide, args, kwargs):
        cls._check(model, guide, args, kwargs)
        posterior = guide.posterior_for(*args, **kwargs)
        key, summary, size = guide.batch_step(posterior, *args, **kwargs)
        return posterior, key, summary, size

    def loss(self, model, guide, *args, **kwargs):
        """Negative exact memoized ELBO with the current batch's summary refreshed (the memo is unchanged)."""
        if isinstance(guide, RelationalGuide):
            posterior, key, summary, _ = self._relational_step(model, guide, args, kwargs)
            return -float(posterior.elbo(guide.memo.total_with(key, summary)))
        if isinstance(guide, HDPGuide):
            self._check(model, guide, args, kwargs)
            posterior, key, summary = self._hdp_step(guide, args, kwargs, store=False)
            return -float(posterior.elbo(guide.memo.total_with(key, summary)))
        guide, posterior, key, summary = self._prepare(model, guide, args, kwargs)
        return -float(posterior.elbo(guide.memo.total_with(key, summary)))

    def loss_and_grads(self, model, guide, *args, **kwargs):
        """As :meth:`loss`, then store the batch's summary in the memo and set the gradients
        that move the globals to their closed-form optimum given the new memo."""
        if isinstance(guide, RelationalGuide):
            guide.setup(*args, **kwargs)
            guide.check_data(*args, **kwargs)
            posterior, key, summary, size = self._relational_step(model, guide, args, kwargs)
            guide.memo.replace(key, summary)
            guide.memo_pairs[key] = size
            total = guide.memo.total
            complete = sum(guide.memo_pairs.values()) >= len(guide.spec.pairs(args, kwargs)[0])
            self._move(guide, complete, lambda: posterior.updated(total))
            return -float(posterior.elbo(total))
        if isinstance(guide, HDPGuide):
            self._check(model, guide, args, kwargs)
            guide.check_data(*args, **kwargs)
            posterior, key, summary = self._hdp_step(guide, args, kwargs, store=True)
            guide.memo.replace(key, summary)
            total = guide.memo.total
            complete = guide.memo.num_items >= guide.spec.plate_size(args, kwargs)
            self._move(guide, complete, lambda: posterior.updated(total))
            return -float(posterior.elbo(total))
        guide, posterior, key, summary = self._prepare(model, guide, args, kwargs)
        guide.check_data(*args, **kwargs)
        guide.memo.replace(key, summary)
        total = guide.memo.total
        loss = -float(posterior.elbo(total))
        complete = guide.memo.num_items >= guide.spec.plate_args(args, kwargs)[0]
        self._move(guide, complete,
                   lambda: DPMixturePosterior(posterior.family, posterior.sticks, None, None, None).update(total))
        return loss
