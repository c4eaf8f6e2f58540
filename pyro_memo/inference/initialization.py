"""Initial responsibilities for coordinate ascent."""

import math

import numpy as np
import torch

from ..families import NonFiniteDataError
from ..families.base import as_data_tensor, check_magnitude

INITS = ("kmeans++", "random")


def kmeanspp_responsibilities(x, K, generator=None):
    """Hard responsibilities from k-means++ seeding (Euclidean, on the raw data).

    Picks ``min(K, N)`` seeds, each with probability proportional to its squared
    distance from the seeds so far (uniformly when all remaining distances are zero,
    e.g. duplicated points), and assigns every item to its nearest seed. Components
    without a seed (``N < K``) start empty.

    Every distance is a sum of squared differences (the nearest seed too: ``cdist`` without its
    matrix-product expansion :math:`|x|^2 - 2x^Tc + |c|^2`, which cancels for data far from the origin,
    at 1e8 with unit spread entirely), so the start is the same for translated data.
    """
    n, data = x.shape[0], distance_ready(x)
    seeds = [int(torch.randint(n, (1,), generator=generator))]
    dist = ((data - data[seeds[0]]) ** 2).sum(-1)
    for _ in range(1, min(K, n)):
        total = dist.sum()
        probs = dist / total if bool(total > 0) else torch.full_like(dist, 1.0 / n)
        idx = int(torch.multinomial(probs.cpu().float(), 1, generator=generator))
        seeds.append(idx)
        dist = torch.minimum(dist, ((data - data[idx]) ** 2).sum(-1))
    centers = data[seeds]
    nearest = torch.cdist(data, centers, compute_mode="donot_use_mm_for_euclid_dist").argmin(-1)
    resp = torch.zeros((n, K), dtype=x.dtype, device=x.device)
    resp[torch.arange(n, device=x.device), nearest] = 1.0
    return resp


def distance_ready(x):
    """``x`` itself, unless sums of squared distances between its rows could overflow its dtype (count data of
    1e20 in float32, of 1e160 in float64: the family bounds only their sums, and k-means++'s probabilities became
    NaN, torch's "probability tensor contains either inf, nan or element < 0"): then ``x`` in float64, and scaled
    by a power of two (exactly) where float64 would overflow too. Distances keep their ratios."""
    largest = float(x.abs().amax()) if x.numel() else 0.0
    if largest == 0.0 or 2 * math.log(2 * largest) + math.log(x.numel()) < math.log(torch.finfo(x.dtype).max):
        return x
    x = x.to(torch.float64)
    if 2 * math.log(2 * largest) + math.log(x.numel()) < math.log(torch.finfo(x.dtype).max):
        return x
    return torch.ldexp(x, torch.tensor(-math.frexp(largest)[1], device=x.device))


def random_responsibilities(x, K, generator=None):
    """Soft responsibilities drawn from a flat Dirichlet for each item."""
    g = torch.rand((x.shape[0], K), generator=generator, dtype=x.dtype).to(x.device)
    e = -torch.log(g.clamp_min(1e-300))
    return e / e.sum(-1, keepdim=True)


def initial_responsibilities(x, K, init="kmeans++", seed=0):
    """Responsibilities to start coordinate ascent from.

    :param torch.Tensor x: ``(N, D)`` data.
    :param int K: truncation level.
    :param str init: ``"kmeans++"`` (default) or ``"random"``.
    :param int seed: random seed (a CPU generator, so results match across devices).
    """
    generator = torch.Generator().manual_seed(int(seed))
    if init == "kmeans++":
        return kmeanspp_responsibilities(x, K, generator)
    if init == "random":
        return random_responsibilities(x, K, generator)
    raise ValueError(f"init must be one of {INITS}; got '{init}'")


def initial_items(source, init_items, seed=0):
    """The items an initialisation looks at: all of them when ``source`` holds at most
    ``init_items`` items, else ``init_items`` of them drawn without replacement by ``seed``,
    in data order (the batches concatenated in order).

    The choice depends on the data and the seed only, never on how the data are cut into
    batches, so full-batch, memoized and stochastic VB with one seed start from one place.
    """
    n = source.num_items
    if n <= init_items:
        keep = None
    else:
        keep = np.sort(np.random.default_rng(seed).choice(n, int(init_items), replace=False))
    if keep is not None and hasattr(source, "take"):  # contiguous rows on disk: read only those
        return [source.take(keep)]
    parts, offset = [], 0
    for b in range(source.num_batches):
        batch = source.batch(b)
        size = len(batch)
        if keep is None:
            parts.append(batch)
        else:
            rows = keep[(keep >= offset) & (keep < offset + size)] - offset
            if len(rows):
                parts.append(batch[torch.as_tensor(rows)] if torch.is_tensor(batch) else np.asarray(batch)[rows])
        offset += size
    return parts


def check_batch(family, source, b, values_checked=False, local_dtype=None):
    """Batch ``b`` of ``source`` validated by ``family`` (:meth:`~pyro_memo.ConjugateFamily.check_data`);
    its error names the batch and, for contiguous batches, its rows (``source.describe(b)``). With a
    ``local_dtype`` (mixed precision) its values, on their first scan, must also not overflow that dtype
    (:func:`~pyro_memo.families.base.check_magnitude` to the first power: the local step forms products
    with the data in it, its statistics stay in the family's dtype)."""
    x = source.batch(b)
    try:
        x = family.check_data(x if torch.is_tensor(x) else np.asarray(x), values_checked=values_checked)
        if local_dtype is not None and local_dtype != x.dtype and not values_checked:
            check_magnitude(x, family.name, 1, local_dtype, small=False, fix=LOCAL_FIX)
        return x
    except NonFiniteDataError as err:
        raise err.within(source.describe(b), source.first_row(b)) from None
    except ValueError as err:
        raise ValueError(f"{source.describe(b)}: {err}") from None


#: what a magnitude error of a mixed-precision fit suggests
LOCAL_FIX = "leave local_dtype unset (the local step in the fit's dtype)"


def initial_summary(family, source, K, init="kmeans++", init_items=10_000, seed=0, local_dtype=None):
    """``(summary, items)``: the summary of initial responsibilities
    (:func:`initial_responsibilities`) of the items :func:`initial_items` picks, and how many
    items it covers. Those items, drawn from all the data, stand for its scale: they must not be so
    small that the family's statistics underflow its dtype, nor, with a ``local_dtype``, the data
    themselves that one (:func:`~pyro_memo.families.base.check_magnitude`), and the family's dtype and
    the ``local_dtype`` must resolve their spread (:meth:`~pyro_memo.ConjugateFamily.check_resolution`,
    on the items as given: their conversion to float32 may have rounded a column's spread away)."""
    from ..summaries import Summary

    given = [p if torch.is_tensor(p) else np.asarray(p) for p in initial_items(source, init_items, seed)]
    try:
        x = torch.cat([family.check_data(p) for p in given])
    except ValueError:
        for b in range(source.num_batches):  # rare: say which batch holds the bad item
            check_batch(family, source, b)
        raise
    check_magnitude(x, family.name, family.stat_degree)
    given = torch.cat([as_data_tensor(p, family.name) for p in given])
    family.check_resolution(given)
    if local_dtype is not None and local_dtype != x.dtype:
        check_magnitude(x, family.name, 1, local_dtype, fix=LOCAL_FIX)
        family.check_resolution(given, local_dtype, fix=LOCAL_FIX)
    resp = initial_responsibilities(x, K, init, seed)
    return Summary.from_responsibilities(family, x, resp), x.shape[0]
