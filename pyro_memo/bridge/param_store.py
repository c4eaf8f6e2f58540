"""What the guides share about Pyro's param store: a per-model name prefix, the shape check
before stored parameters are reused, and the fingerprint of the data they were fitted to.

**Prefix.** A guide built without ``prefix=`` stores its parameters under
``"memo.<name>"``, where ``<name>`` is the model's ``__qualname__`` (a function) or its
class's ``__qualname__`` (an instance such as :class:`~pyro_memo.DPMixtureModel`). A second,
distinct model object with the same name alive in the same process gets ``"memo.<name>.1"``,
then ``".2"``, ...; so the prefix is the same from run to run of a script that builds its
models in the same order, and two models fitted one after the other keep their own parameters.
Guides of the *same* model object share the prefix (a second guide continues the first); so do guides of one
bound method of one object (``obj.model``, a new bound method object at every access).

**Warm starts.** Parameters already in the store under the prefix are reused (a warm start)
when their shapes are those the model needs now (``K`` components of dimension ``D``);
otherwise the guide raises a :class:`ValueError` naming the prefix. Next to them the guide
keeps ``"{prefix}.fingerprint"``: ``(N, D, checksum)`` of the data they were fitted to. The
training entry points (:class:`~pyro_memo.MemoizedELBO`, :func:`~pyro_memo.fit_vb`,
:func:`~pyro_memo.fit_memoized`) warn with :class:`WarmStartWarning` when they continue
from parameters fitted to other data, then record the new data's fingerprint. Running the guide
itself (``Predictive``, ``Trace_ELBO`` on new data) never warns: that is prediction.
"""

import hashlib
import inspect
import itertools
import warnings
import weakref

import pyro
import torch

_PREFIXES = {}  # prefix -> weak reference to (or, if not weak-referenceable, the) model


class WarmStartWarning(UserWarning):
    """A fit continues from stored parameters that were fitted to other data."""


def _ref(model):
    """A weak reference to ``model``: a :class:`weakref.WeakMethod` for a bound method (``obj.model`` is a new
    object at every access, which a plain weak reference lets die at once), else a plain one, else ``model``."""
    try:
        return weakref.WeakMethod(model) if inspect.ismethod(model) else weakref.ref(model)
    except TypeError:
        return lambda: model


def same_model(a, b):
    """Whether ``a`` and ``b`` are the same model: the same object, or the same bound method of the same object
    (``obj.model`` makes a new bound method object at every access; they compare equal)."""
    return a is b or (inspect.ismethod(a) and inspect.ismethod(b) and a == b)


def default_prefix(model):
    """``"memo.<model's qualname>"``, with ``".1"``, ``".2"``, ... for further distinct live models of
    the same name (see the module docstring)."""
    name = getattr(model, "__qualname__", None) or type(model).__qualname__
    name = name.replace("<", "").replace(">", "")
    for i in itertools.count():
        prefix = f"memo.{name}" if i == 0 else f"memo.{name}.{i}"
        owner = _PREFIXES.get(prefix)
        current = None if owner is None else owner()
        if current is None or same_model(current, model):
            _PREFIXES[prefix] = _ref(model)
            return prefix


def start_fresh_hint(prefix):
    return (f"call pyro.clear_param_store() to start fresh, or give the guide another prefix= "
            f"(its parameters are stored under '{prefix}.*')")


def check_shapes(prefix, names, expected):
    """Raise a clear ValueError if stored params under ``names`` (key -> store name) do not have the
    ``expected`` shapes (key -> torch.Size)."""
    store = pyro.get_param_store()
    bad = {key: (tuple(store[name].shape), tuple(expected[key])) for key, name in names.items()
           if name in store and tuple(store[name].shape) != tuple(expected[key])}
    if bad:
        detail = ", ".join(f"'{names[k]}' is {got}, needs {want}" for k, (got, want) in bad.items())
        raise ValueError(f"the param store holds parameters under prefix '{prefix}' whose shapes do not fit this "
                         f"model ({detail}): they were fitted with another truncation K or data dimension D; "
                         + start_fresh_hint(prefix))


def require_params(guide):
    """Raise :class:`RuntimeError` unless ``guide`` has seen its model and the param store holds its
    parameters: a read-out (``posterior``, ``median``, ``sample_posterior``) before the guide's first call,
    or after ``pyro.clear_param_store()``, is that error, not Pyro's ``KeyError``."""
    if guide.spec is None:
        raise RuntimeError("the guide has not seen the model yet: call guide.setup(*args) (or fit it) first")
    store = pyro.get_param_store()
    missing = [name for name in guide._names().values() if name not in store]
    if missing:
        raise RuntimeError(f"the param store holds none of this guide's parameters {missing} (cleared by "
                           f"pyro.clear_param_store()?): fit the guide again, or call guide.setup(*args) to "
                           f"initialise them")


def fingerprint(x):
    """``(N, D, checksum)`` of a data tensor, as float64 (the checksum: 48 bits of a SHA-1 of its bytes, read as
    bytes so that any dtype has one, ``bfloat16`` included, which numpy has not)."""
    x = torch.as_tensor(x).detach().cpu().contiguous()
    digest = hashlib.sha1(x.reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()
    d = x.shape[1] if x.dim() > 1 else 1
    return torch.tensor([x.shape[0], d, int(digest[:12], 16)], dtype=torch.float64)


class DataFingerprint:
    """Records and checks the fingerprint of the data a prefix's parameters were fitted to."""

    def __init__(self):
        self._seen = None

    def record(self, prefix, x):
        pyro.get_param_store()[f"{prefix}.fingerprint"] = fingerprint(x)
        self._seen = (prefix, id(x), getattr(x, "_version", None))

    def check(self, prefix, x):
        """Warn (:class:`WarmStartWarning`) if the stored fingerprint is of other data; then record ``x``'s."""
        key = (prefix, id(x), getattr(x, "_version", None))
        store = pyro.get_param_store()
        name = f"{prefix}.fingerprint"
        if key == self._seen and name in store:
            return
        new = fingerprint(x)
        if name in store:
            old = store[name].detach()
            if not torch.equal(old, new):
                n, d = int(old[0]), int(old[1])
                warnings.warn(f"continuing from the parameters under '{prefix}', which were fitted to other data "
                              f"(N = {n}, D = {d}; now N = {int(new[0])}, D = {int(new[1])}, different values): this "
                              f"is a warm start. To fit from scratch " + start_fresh_hint(prefix),
                              WarmStartWarning, stacklevel=3)
        self.record(prefix, x)
