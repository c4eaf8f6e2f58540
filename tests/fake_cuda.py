"""A stand-in CUDA device for CPU-only test runs: checks that code keeps the data's device without a GPU.

Inside :func:`fake_cuda`, ``torch.cuda.is_available()`` is true and a tensor created on or moved to
``"cuda"`` is a :class:`FakeCudaTensor`: its values live on the CPU (so the computation runs), but it
reports ``device == cuda:0``, and so does every tensor computed from it. Whatever would fail on a real
GPU is recorded instead of raised, so that one run lists every place at once:

- an op that mixes a fake-CUDA tensor with a CPU tensor of one or more dimensions (0-dim CPU tensors
  mix with CUDA ones in torch);
- a CPU tensor indexed by fake-CUDA indices;
- ``.numpy()`` of a fake-CUDA tensor;
- a CPU generator drawing a CUDA tensor.

A sparse tensor cannot be subclassed; one made from fake-CUDA tensors (or with ``device="cuda"``) is
remembered by identity and counts as a CUDA tensor.
"""

import contextlib
import traceback
import weakref

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

CUDA = torch.device("cuda", 0)

_recorder = None  # the active run's DeviceRecorder
_sparse = {}  # id -> weakref of the sparse tensors that count as CUDA ones

# ops that move or place values rather than combine them: not device mixes
_MOVES = {torch.Tensor.copy_, torch.Tensor.to, torch.Tensor.type_as, torch.Tensor.__getitem__,
          torch.Tensor.__setitem__, torch.Tensor.__repr__, torch.Tensor.__format__, torch.Tensor.cpu}
_ATTRIBUTES = {"device": CUDA, "is_cuda": True, "is_cpu": False}


class DeviceRecorder:
    """What a :func:`fake_cuda` run did that a GPU would refuse: :attr:`mixes` holds one
    ``(kind, where, detail)`` per distinct site (``where``: the innermost frame of ``pyro_memo``)."""

    def __init__(self):
        self.mixes = []
        self._seen = set()

    def record(self, kind, detail):
        frames = [f for f in traceback.extract_stack() if "/torch/" not in f.filename and f.filename != __file__]
        ours = [f for f in frames if "/pyro_memo/" in f.filename] or frames
        where = f"{ours[-1].filename.rsplit('/pyro_memo/', 1)[-1]}:{ours[-1].lineno}"
        if (kind, where) not in self._seen:
            self._seen.add((kind, where))
            self.mixes.append((kind, where, detail))

    def __str__(self):
        return "\n".join(f"{kind} at {where} ({detail})" for kind, where, detail in self.mixes) or "no device mix"


def _record(kind, detail=""):
    if _recorder is not None:
        _recorder.record(kind, detail)


def _is_cuda(t):
    return isinstance(t, FakeCudaTensor) or (_sparse.get(id(t)) is not None and _sparse[id(t)]() is t)


def _cuda_spec(device):
    return isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda"


def _cpu_spec(device):
    return isinstance(device, (str, torch.device)) and torch.device(device).type == "cpu"


def _plain(t):
    return t.as_subclass(torch.Tensor) if isinstance(t, FakeCudaTensor) else t


def _to_cuda(value):
    """``value`` (a tensor, or a tuple or list of them) on the fake device."""
    if isinstance(value, (tuple, list)):
        return type(value)(_to_cuda(v) for v in value)
    if not isinstance(value, torch.Tensor) or _is_cuda(value):
        return value
    if value.layout != torch.strided:
        _sparse[id(value)] = weakref.ref(value)
        return value
    return value.as_subclass(FakeCudaTensor)


class FakeCudaTensor(torch.Tensor):
    """A CPU tensor that reports the CUDA device and records the ops a GPU would refuse."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") == "__get__":
            attribute = getattr(getattr(func, "__self__", None), "__name__", "")
            if attribute in _ATTRIBUTES:
                return _ATTRIBUTES[attribute]
        if func in (torch.Tensor.numpy, torch.Tensor.__array__):
            _record("numpy() of a cuda tensor", func.__name__)
            return func(_plain(args[0]), *args[1:], **kwargs)
        if func is torch.Tensor.cpu or (func is torch.Tensor.to and _moves_to_cpu(args, kwargs)):
            rest = [a for a in args[1:] if not isinstance(a, (str, torch.device))]
            kw = {k: v for k, v in kwargs.items() if k != "device"}
            with torch._C.DisableTorchFunctionSubclass():
                return _plain(args[0]).to(*rest, **kw) if rest or kw else _plain(args[0])
        if kwargs.get("generator") is not None and kwargs["generator"].device.type == "cpu":
            _record("cpu generator on a cuda tensor", func.__name__)
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        with torch._C.DisableTorchFunctionSubclass():
            if func not in _MOVES:
                cpu = [tuple(t.shape) for t in tensors if not _is_cuda(t) and t.dim() > 0]
                if cpu:
                    _record("cpu tensor mixed with a cuda tensor", f"{func.__name__}, cpu shapes {cpu[:3]}")
            elif func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and not _is_cuda(args[0]):
                if any(_is_cuda(t) for t in tree_flatten(args[1])[0] if isinstance(t, torch.Tensor)):
                    _record("cpu tensor indexed by cuda indices", func.__name__)
            out = func(*args, **kwargs)
        if func is torch.Tensor.__setitem__:
            return out
        return torch._tensor._convert(out, cls)


def _moves_to_cpu(args, kwargs):
    """Whether a ``Tensor.to`` call names the CPU (a device, or a CPU tensor to follow)."""
    targets = [kwargs.get("device")] + list(args[1:])
    return any(_cpu_spec(t) or (isinstance(t, torch.Tensor) and not _is_cuda(t)) for t in targets)


class _FakeCudaMode(TorchFunctionMode):
    """Factories and moves to ``"cuda"`` run on the CPU and return fake-CUDA tensors."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        to_cuda = _cuda_spec(kwargs.get("device"))
        if to_cuda:
            kwargs["device"] = "cpu"
            if kwargs.get("generator") is not None and kwargs["generator"].device.type == "cpu":
                _record("cpu generator on a cuda tensor", getattr(func, "__name__", ""))
        if func is torch.Tensor.cuda:
            return _to_cuda(_plain(args[0]))
        if func is torch.Tensor.to and any(_cuda_spec(a) for a in args[1:]):
            args, to_cuda = tuple("cpu" if _cuda_spec(a) else a for a in args), True
        out = func(*args, **kwargs)
        sparse_from_cuda = (isinstance(out, torch.Tensor) and out.layout != torch.strided
                            and any(_is_cuda(t) for t in tree_flatten((args, kwargs))[0]))
        return _to_cuda(out) if to_cuda or sparse_from_cuda else out


@contextlib.contextmanager
def fake_cuda():
    """Run the block with the stand-in CUDA device; yields its :class:`DeviceRecorder`. ``torch.cuda``'s
    ``is_available`` and ``device_count`` are restored on exit."""
    global _recorder
    saved = torch.cuda.is_available, torch.cuda.device_count, _recorder
    torch.cuda.is_available, torch.cuda.device_count = (lambda: True), (lambda: 1)
    _recorder = DeviceRecorder()
    try:
        with _FakeCudaMode():
            yield _recorder
    finally:
        torch.cuda.is_available, torch.cuda.device_count, _recorder = saved
        _sparse.clear()
