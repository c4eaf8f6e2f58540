"""Where the local steps of a memoized lap run: in the driver's process (:class:`SerialExecutor`) or on
the workers of a Dask cluster (:class:`DaskExecutor`, Rocklin 2015; the ``distributed`` scheduler).

The driver hands an executor the batch keys of one round; the executor runs each batch's *batch
side* (:meth:`~pyro_memo.engine.MemoizedDriver.batch_step`: the local step under the round's
globals and the moves' batch terms) and yields one :class:`BatchStep` per key, in the order the
keys were given, whatever order the workers finish in. The driver then adds and subtracts the
summaries exactly as in a serial lap (Hughes & Sudderth 2013, eq. 11), so the memo, the moves and
the objective do not depend on where, or on how many workers, the steps ran.

On Dask, workers own their batches: each batch is loaded on a worker once, from a path, a zarr
array or a dask array chunk when the source can be read there (:attr:`BatchSource.portable
<pyro_memo.data.BatchSource.portable>`), else sent from the driver once, and stays in the
worker's memory across laps. Per round only the globals go out (once, to every worker) and the
batch summaries come back, with each batch's warm start (the HDP's document-topic counts, the
relational model's factors) when the model keeps one, and the moves' batch-side visits
(:meth:`~pyro_memo.Move.batch_visit`: a birth's subsample, a delete's alternative summaries).
Only a move that visits batches on the driver (:meth:`~pyro_memo.Move.visit_batch`) gets the
batch and its local factors back.
"""

import collections
import contextlib
import itertools
import numbers
import os
from dataclasses import dataclass

import numpy as np
import torch

from ..checks import as_positive_int
from .threads import check_threads

__all__ = ["BatchStep", "DaskExecutor", "Executor", "SerialExecutor", "as_executor"]


@dataclass
class BatchStep:
    """One batch's batch side: its summary (in the memo's precision, with the moves' batch
    terms in ``summary.extras``), what the model keeps for the batch's next visit (``warm``; ``None``
    when nothing), local-step iterations, the batch and its local factors when a move visits
    batches on the driver (else ``None``), the moves' batch-side visits by name, and the digest of the
    batch as read on its first visit in the fit (data not held in memory; else ``None``;
    :meth:`~pyro_memo.engine.MemoizedDriver.visit_digest`)."""

    summary: object
    warm: object = None
    iterations: list = None
    batch: object = None
    local: object = None
    visits: dict = None
    digest: str = None


class Untimed:
    """The thread policy of a driver's copy that runs steps elsewhere: steps are not timed, the
    executor sets the threads."""

    def step(self):
        return contextlib.nullcontext()


class Executor:
    """Runs the batch side of a round of batches (module docstring)."""

    #: the lap schedule a fit uses when none is named: ``"sequential"`` or ``"parallel"``
    default_schedule = "sequential"

    def start(self, driver, source):
        """Before the first lap of a fit on ``source``."""

    def steps(self, driver, state, source, keys):
        """Yield ``(key, BatchStep)`` for ``keys`` in order, every step under ``state.posterior``."""
        raise NotImplementedError

    def close(self):
        """After the fit, also when it failed: release what :meth:`start` made."""


class SerialExecutor(Executor):
    """Today's behaviour: every batch read and its local step run in the driver's process, one
    after the other, lazily (the next batch's step starts only when the driver asks for it, so a
    sequential lap sees the globals of the previous batch's update). After each batch of at least
    ``TRIM_BYTES`` the process's free heap pages go back to the system (``release_free_memory()``)."""

    def steps(self, driver, state, source, keys):
        back = driver.returns_batch()
        for key in keys:
            batch = driver.read_batch(source, key)
            big = _is_big(batch)
            digest = driver.visit_digest(key, batch)
            local, summary, visits = driver.batch_step(state, key, batch)
            yield key, BatchStep(summary, driver.keep_local(local), None, batch if back else None,
                                 local if back else None, visits, digest)
            if big:
                release_free_memory()


#: batches at least this large (bytes) are followed by ``release_free_memory()`` in a serial lap
TRIM_BYTES = 8 * 2**20


def _nbytes(batch):
    """The bytes of a batch's arrays: a tensor, a numpy array, or a tuple of them (a corpus batch's tokens)."""
    if torch.is_tensor(batch):
        return batch.element_size() * batch.nelement()
    if isinstance(batch, np.ndarray):
        return batch.nbytes
    if isinstance(batch, (tuple, list)):
        return sum(_nbytes(part) for part in batch)
    return 0


#: results (batch summaries) the default window of a :class:`DaskExecutor` lets wait for the driver
RESULT_BYTES = 256 * 2**20

#: seconds a fit waits for a first worker of a cluster that has none yet (one just made, or scaled up, starts
#: its workers in the background: a fit begun at once found none)
WORKER_WAIT = 30.0


def _nbytes_of(obj):
    """Bytes of the tensors of a summary or posterior (its attributes' tensors and dicts of tensors)."""
    total = 0
    for value in vars(obj).values():
        for part in value.values() if isinstance(value, dict) else (value,):
            if torch.is_tensor(part):
                total += part.element_size() * part.nelement()
    return total


def _is_big(batch):
    return _nbytes(batch) >= TRIM_BYTES


def release_free_memory():
    """Give the free pages inside the process's heap back to the system (glibc's ``malloc_trim``).
    A lap over large batches allocates tens of megabytes per step between the memo's small lasting
    allocations; glibc keeps the freed space, and on 20,000,000 items in D = 64 (200 batches of
    100,000) the driver's heap grew past 2.7 GB by lap 2 of births, merges and deletes. A no-op off glibc."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def as_executor(executor):
    """``executor`` as an :class:`Executor`: ``None`` for :class:`SerialExecutor`, a
    ``dask.distributed.Client`` for :class:`DaskExecutor`, or an executor as it is."""
    if executor is None:
        return SerialExecutor()
    if isinstance(executor, Executor):
        return executor
    if type(executor).__name__ == "Client" and type(executor).__module__.startswith("distributed"):
        return DaskExecutor(executor)
    raise TypeError(f"executor must be None (serial), a dask.distributed.Client or a pyro_memo Executor; got "
                    f"{type(executor).__name__}")


# ------------------------------------------------------------------ the worker side
#: glibc's ``mallopt`` parameters a worker process gets (see :func:`tune_allocator`)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: the mmap threshold (glibc's largest) and the trim threshold a worker process gets
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 * 2**20, 256 * 2**20
_tuned = False


def tune_allocator():
    """Once per worker process: give glibc's allocator an mmap threshold of 32 MiB and a trim
    threshold of 256 MiB. Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which
    also freezes glibc's adaptive mmap threshold at 128 KiB, so every large torch temporary of a
    local step is mapped and unmapped afresh: measured on this project's machine, a DP local step
    ran 2x slower in such a worker (13.0 s against 6.5 s per lap, 200,000 patches, K = 100). A no-op
    off glibc."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    except (OSError, AttributeError):
        pass


def read_on_worker(reader, source, b):
    """Batch ``b`` of a portable ``source``, read and validated on the worker by ``reader``
    (the driver's :meth:`~pyro_memo.engine.driver.Driver.read_batch`)."""
    tune_allocator()
    return reader.read_batch(source, b)


def step_on_worker(driver, posterior, key, batch, warm, cached, threads, source=None):
    """The batch side of batch ``key`` on a worker: a one-batch state holding the round's globals,
    the batch's warm start and its cached summary (all a model's local step may read), then
    :meth:`~pyro_memo.engine.MemoizedDriver.batch_step`. ``batch`` is ``None`` when the worker does
    not hold it: it is read from the portable ``source`` for this step."""
    from ..memo import MemoState

    tune_allocator()
    if batch is None:
        batch = driver.read_batch(source, key)
    if threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    state = MemoState(posterior=posterior)
    if warm is not None:
        state.warm_starts[key] = warm
    if cached is not None:
        state.cache.batches[key] = cached
    digest = driver.visit_digest(key, batch)
    local, summary, visits = driver.batch_step(state, key, batch)
    back = driver.returns_batch()
    return BatchStep(summary, driver.keep_local(local), state.local_iterations or None, batch if back else None,
                     local if back else None, visits, digest)


def check_open(client):
    """``client`` unless it is closed (or closing): :class:`ValueError` then, where a closed client's
    ``scheduler_info()`` had no ``"workers"`` (a ``KeyError``)."""
    status = str(getattr(client, "status", "running"))
    if status in ("closing", "closed"):
        raise ValueError(f"executor: the dask.distributed.Client is {status}; give a running client")
    return client


def _machine_memory():
    """This machine's physical memory in bytes (a generous 16 GiB where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


def workers_of(client):
    """``{address: info}`` of every worker of ``client``'s cluster. ``distributed`` 2025.4 to 2026.6 (which
    ``distributed>=2024.1`` allows) list only the first five in ``scheduler_info()`` unless asked for all
    (``n_workers=-1``), an argument earlier versions do not take: a fit on seven workers dealt its batches to five."""
    import inspect

    every = {"n_workers": -1} if "n_workers" in inspect.signature(client.scheduler_info).parameters else {}
    return client.scheduler_info(**every)["workers"]


def joined_workers(client):
    """The sorted addresses of ``client``'s workers once at least one has joined, waiting up to
    ``WORKER_WAIT`` seconds.

    :raises RuntimeError: when none joined by then.
    """
    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT)
    except TimeoutError:
        raise RuntimeError(f"the Dask cluster has no workers (none joined within {WORKER_WAIT:g} s)") from None
    return sorted(workers_of(client))


class DaskExecutor(Executor):
    """The batch side on the workers of a ``dask.distributed`` cluster (module docstring).

    :param client: a ``dask.distributed.Client`` (of a ``LocalCluster`` or of a running scheduler).
    :param int retries: times Dask reruns a batch's step, on another worker, when its worker dies.
    :param int threads: intra-op threads of torch on each worker during a step (default 1: the
        cluster's parallelism is its workers; ``None`` leaves the workers' setting).
    :param int window: at most this many batch steps in flight at once. Default: as many as keep
        ``RESULT_BYTES`` of results (sized by the memo's summary) waiting for the driver, at least
        twice the number of workers; just twice the number of workers in laps where a move gets each
        batch and its local factors back. A window of twice the workers left workers idle while the
        driver waited for a slower step (1.51x against 1.80x with the whole lap in flight, 2 workers,
        ``benchmarks/bench_dask.py``).
    :param hold: whether workers keep their batches in memory across laps (``True``) or read each
        from the source at every step (``False``; portable sources only, a ValueError for data in memory:
        data larger than the workers' memory). ``None`` (default): hold them when a worker's share,
        estimated as its number of batches times the first batch's size, takes at most a quarter of its
        memory limit (of the machine's memory when the cluster sets none).
    """

    default_schedule = "parallel"

    #: the share of a worker's memory its held batches may take (``hold=None``)
    HOLD_SHARE = 0.25

    def __init__(self, client, retries=3, threads=1, hold=None, window=None):
        if not hasattr(client, "scheduler_info"):
            raise TypeError(f"DaskExecutor needs a dask.distributed.Client; got {type(client).__name__}")
        check_open(client)
        if isinstance(retries, bool) or not isinstance(retries, numbers.Integral) or retries < 0:
            raise ValueError(f"retries must be a whole number of at least 0; got {retries!r}")
        if hold not in (None, True, False):
            raise ValueError(f"hold must be True, False or None (decide by the workers' memory); got {hold!r}")
        self.client = client
        self.window = None if window is None else as_positive_int(window, "window")
        self.retries = int(retries)
        self.threads = check_threads(threads)
        self.hold = hold
        self.batches, self.inputs, self.owners = {}, (), {}

    def start(self, driver, source):
        """Load every batch on a worker, the batches dealt to the workers in turn (equal shares, so no
        worker is the lap's straggler): read there when the source is portable (a worker that dies
        takes nothing with it: Dask reads the batch again elsewhere), else read here and sent once."""
        client = check_open(self.client)
        if self.hold is False and not getattr(source, "portable", False):
            raise ValueError(f"hold=False: workers read each batch from its source at every step, which needs data "
                             f"they can read (a .npy path, a zarr or dask array, corpus shards); "
                             f"{type(source).__name__} is held in this process and sent to the workers once "
                             f"(give hold=None or True, or the data as a file)")
        reader = driver.reader()
        workers = sorted(workers_of(client)) or joined_workers(client)
        self.owners = {b: workers[b % len(workers)] for b in range(source.num_batches)}
        if getattr(source, "portable", False):
            # kept for the whole fit: Dask re-reads a lost batch from them
            self.inputs = reader_f, source_f = client.scatter([reader, source], broadcast=True, hash=False)
            if not self.holds(driver, source, len(workers)):
                self.batches = dict.fromkeys(self.owners)
                return
            self.batches = {b: client.submit(read_on_worker, reader_f, source_f, b, pure=False, retries=self.retries,
                                             workers=[owner], allow_other_workers=True)
                            for b, owner in self.owners.items()}
        else:
            self.batches = {b: client.scatter([driver.read_batch(source, b)], hash=False, workers=[owner])[0]
                            for b, owner in self.owners.items()}

    def holds(self, driver, source, num_workers):
        """Whether the workers keep a portable source's batches in memory (see ``hold``)."""
        if self.hold is not None:
            return bool(self.hold)
        share = _nbytes(driver.read_batch(source, 0)) * -(-source.num_batches // num_workers)
        limits = [w.get("memory_limit") or 0 for w in workers_of(self.client).values()]
        limit = min(limits) if limits and min(limits) > 0 else _machine_memory() / num_workers
        return share <= self.HOLD_SHARE * limit

    def steps(self, driver, state, source, keys):
        if not self.batches:
            self.start(driver, source)
        client = self.client
        worker, posterior = driver.for_workers(state)
        worker_f, posterior_f = client.scatter([worker, posterior], broadcast=True, hash=False)

        def submit(key):
            cached = state.cache.batches.get(key) if driver.local_step_reads_memo else None
            source_f = self.inputs[1] if self.batches[key] is None else None
            return client.submit(step_on_worker, worker_f, posterior_f, key, self.batches[key],
                                 state.warm_starts.get(key), cached, self.threads, source_f, pure=False,
                                 retries=self.retries, workers=[self.owners[key]], allow_other_workers=True)

        # at most `window` steps in flight: results wait on the workers only until the driver takes them
        window = self.window or self.default_window(driver, state)
        waiting = iter(keys)
        flight = collections.deque((key, submit(key)) for key in itertools.islice(waiting, window))
        try:
            while flight:
                key, future = flight.popleft()
                result = self._result(future, key, lambda key=key: self._again(driver, state, source, key))
                future.release()
                following = next(waiting, None)
                if following is not None:
                    flight.append((following, submit(following)))
                yield key, result
                if _is_big(result.batch):  # a batch a move visited here has been dropped
                    release_free_memory()
        finally:
            for _, future in flight:
                future.cancel()

    def default_window(self, driver, state):
        """Batch steps in flight when ``window`` is not given (see the class docstring)."""
        least = 2 * len(set(self.owners.values()))
        if driver.returns_batch():
            return least
        reference = state.cache.total if state.cache.total is not None else state.posterior
        return max(least, RESULT_BYTES // max(_nbytes_of(reference), 1))

    def _again(self, driver, state, source, key):
        """Batch ``key``'s step submitted afresh after Dask lost it with a worker: the globals sent
        with it and the batch read again from its (portable) source on whichever worker runs it."""
        if not getattr(source, "portable", False):
            return None
        worker, posterior = driver.for_workers(state)
        cached = state.cache.batches.get(key) if driver.local_step_reads_memo else None
        return self.client.submit(step_on_worker, worker, posterior, key, None, state.warm_starts.get(key), cached,
                                  self.threads, source, pure=False, retries=self.retries)

    def _result(self, future, key, again=None):
        """``future``'s result; when Dask lost the step with a worker, the step once more from
        ``again()`` (a fresh submission), else one clear error."""
        try:
            return future.result()
        except Exception as err:
            if type(err).__name__ not in ("KilledWorker", "FutureCancelledError", "CancelledError"):
                raise
            retry = again() if again is not None else None
            if retry is not None:
                return self._result(retry, key)
            hint = "" if self.inputs else ("; batches of data held in memory live only on the worker they were sent "
                                           "to: give the data as a .npy path, a zarr array or a dask array, which "
                                           "workers read again")
            raise RuntimeError(f"batch {key}: its local step was lost with a Dask worker ({type(err).__name__}); "
                               f"the fit stopped with the memo as it was after the last completed batch, and the "
                               f"last saved checkpoint is intact{hint}") from err

    def close(self):
        for future in list(self.batches.values()) + list(self.inputs):
            if future is not None:
                future.cancel()
        self.batches, self.inputs, self.owners = {}, (), {}
