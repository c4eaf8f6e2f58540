"""The summary interface: additive statistics of a set of items, the one currency of the engine.

Every model's local step turns a batch into a summary; memoized inference, moves, checkpoints
and distributed execution only add, subtract, scale, select, merge, expand and move summaries.
A concrete summary is a dataclass that declares which of its fields carry a component axis;
this base class implements the operations once for all of them (Hughes & Sudderth 2013 §3:
the memo is a sum of per-batch summaries).
"""

import dataclasses

import torch


def _map(value, fn):
    """``fn`` applied to a tensor, or to every tensor of a dict of tensors."""
    return {k: fn(v) for k, v in value.items()} if isinstance(value, dict) else fn(value)


def _zip(a, b, fn):
    """``fn`` applied pairwise to two tensors or two dicts of tensors with the same keys."""
    if isinstance(a, dict):
        if a.keys() != b.keys():
            raise ValueError(f"cannot combine summaries with statistics {sorted(a)} and {sorted(b)}")
        return {k: fn(v, b[k]) for k, v in a.items()}
    return fn(a, b)


class AdditiveSummary:
    """Base of every summary: a dataclass whose tensor fields add over disjoint sets of items.

    Subclasses declare their fields by role:

    - ``component_fields``: tensors (or dicts of tensors) with a leading axis of length ``K``;
    - ``tail_fields``: tensors with ``K + 1`` entries, the last one the mass beyond the truncation;
    - ``scalar_fields``: additive quantities with no component axis;
    - ``count_field``: the name of the integer number of items (or groups) summarised;
    - ``extras``: a dict field of **per-move terms** a batch's visit computed for a move (bnpy
      carries its merge terms in its statistics bag the same way): name -> tensor, additive.
      They are the batch side of a move (see :class:`~pyro_memo.Move`), computed where the
      local step runs and carried with the batch's summary; a sum keeps the names both operands
      carry, and any change of components (select, expand, merge) drops them.
    """

    component_fields = ()
    tail_fields = ()
    scalar_fields = ()
    count_field = "num_items"

    # ---------------------------------------------------------------- fields
    @property
    def K(self):
        """Number of components."""
        return _first_tensor(getattr(self, self.component_fields[0])).shape[0]

    @property
    def item_count(self):
        """Number of items (or groups) summarised."""
        return getattr(self, self.count_field)

    def _additive_fields(self):
        return self.component_fields + self.tail_fields + self.scalar_fields

    def _replace(self, count=None, **changes):
        if count is not None:
            changes[self.count_field] = count
        return dataclasses.replace(self, **changes)

    # --------------------------------------------------------------- algebra
    def _combine(self, other, sign):
        if type(other) is not type(self):
            return NotImplemented
        if other.K != self.K:
            raise ValueError(f"cannot combine summaries with K={self.K} and K={other.K}")
        changes = {f: _zip(getattr(self, f), getattr(other, f), lambda a, b: a + sign * b)
                   for f in self._additive_fields()}
        changes["extras"] = {k: v + sign * other.extras[k] for k, v in self.extras.items() if k in other.extras}
        return self._replace(self.item_count + sign * other.item_count, **changes)

    def __add__(self, other):
        return self._combine(other, 1)

    def __sub__(self, other):
        return self._combine(other, -1)

    def scaled(self, factor, num_items=None):
        """Every additive quantity multiplied by ``factor`` (a batch blown up to data scale);
        the item count becomes ``num_items`` when given, else stays."""
        changes = {f: _map(getattr(self, f), lambda t: t * factor) for f in self._additive_fields()}
        changes["extras"] = {k: v * factor for k, v in self.extras.items()}
        return self._replace(num_items, **changes)

    def extrapolated(self, step, factors):
        """``self + factors * step`` with one factor per component (``(K,)``; an over-relaxed
        proposal, :mod:`~pyro_memo.engine.overrelax`): component fields scaled component by
        component and tail entries by their component's factor, the tail mass by the smallest one.
        Scalar fields (entropies, data counts), the item count and the moves' extras stay as they are."""
        if step.K != self.K:
            raise ValueError(f"cannot extrapolate a summary with K={self.K} along a step with K={step.K}")
        with_tail = torch.cat([factors, factors.min().reshape(1)])

        def along(rows):
            return lambda a, b: a + b * rows.reshape((-1,) + (1,) * (b.dim() - 1)).to(b)

        changes = {f: _zip(getattr(self, f), getattr(step, f), along(factors)) for f in self.component_fields}
        changes.update({f: _zip(getattr(self, f), getattr(step, f), along(with_tail)) for f in self.tail_fields})
        return self._replace(**changes)

    # ------------------------------------------------------------ components
    def select(self, index):
        """The summary restricted (and reordered) to components ``index``; tail entries stay last."""
        device = _first_tensor(getattr(self, self.component_fields[0])).device
        index = torch.as_tensor(index, dtype=torch.long, device=device)
        changes = {f: _map(getattr(self, f), lambda t: t[index]) for f in self.component_fields}
        if self.tail_fields:
            with_tail = torch.cat([index, torch.tensor([self.K], device=device)])
            changes.update({f: getattr(self, f)[with_tail] for f in self.tail_fields})
        return self._replace(extras={}, **changes)

    def expand(self, K):
        """This summary with zero components appended up to ``K`` (nested truncation: the new
        components have no assignments yet)."""
        extra = K - self.K
        if extra < 0:
            raise ValueError(f"cannot expand a summary with K={self.K} to K={K}")
        if self.tail_fields:
            raise ValueError(f"{type(self).__name__} cannot be expanded: its fields {self.tail_fields} are not "
                             "zero for new components; recompute it with a local step")

        def pad(t):
            return torch.cat([t, t.new_zeros((extra,) + t.shape[1:])])

        return self._replace(extras={}, **{f: _map(getattr(self, f), pad) for f in self.component_fields})

    def merged(self, a, b, **at_a):
        """The summary after component ``b`` is merged into ``a`` (Hughes & Sudderth 2013 §3.2):
        component statistics add, component ``b`` is removed and later ones shift down. Fields
        that are not additive in the assignments (an entropy) must be given for ``a`` in
        ``at_a``."""
        if self.tail_fields:
            raise ValueError(f"{type(self).__name__} cannot be merged from its fields alone; refit the groups")
        keep = [k for k in range(self.K) if k != b]

        def combine(t):
            t = t.clone()
            t[a] = t[a] + t[b]
            return t[keep]

        changes = {}
        for f in self.component_fields:
            if f in at_a:
                t = getattr(self, f).clone()
                t[a] = at_a[f]
                changes[f] = t[keep]
            else:
                changes[f] = _map(getattr(self, f), combine)
        return self._replace(extras={}, **changes)

    # -------------------------------------------------------------- storage
    def to(self, dtype=None, device=None):
        """This summary with every tensor (``extras`` included) moved to ``device`` and every
        floating-point one converted to ``dtype``; integer tensors keep theirs."""

        def move(t):
            return t.to(dtype=dtype if dtype is not None and t.is_floating_point() else t.dtype, device=device)

        changes = {f: _map(getattr(self, f), move) for f in self._additive_fields()}
        return self._replace(extras={k: move(v) for k, v in self.extras.items()}, **changes)

    def to_dict(self):
        """Plain tensors, dicts and numbers (``torch.load(weights_only=True)`` reads them back)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def without(self, name):
        """This summary without move ``name``'s extra terms (the same object when it has none)."""
        if name not in self.extras:
            return self
        return self._replace(extras={k: v for k, v in self.extras.items() if k != name})

    @classmethod
    def from_dict(cls, d):
        """The inverse of :meth:`to_dict`."""
        values = dict(d)
        values[cls.count_field] = int(values[cls.count_field])
        values["extras"] = dict(values.get("extras", {}))
        return cls(**values)


def _first_tensor(value):
    return next(iter(value.values())) if isinstance(value, dict) else value
