"""Initial responsibilities for coordinate ascent."""

import torch

INITS = ("kmeans++", "random")


def kmeanspp_responsibilities(x, K, generator=None):
    """Hard responsibilities from k-means++ seeding (Euclidean, on the raw data).

    Picks ``min(K, N)`` seeds, each with probability proportional to its squared
    distance from the seeds so far (uniformly when all remaining distances are zero,
    e.g. duplicated points), and assigns every item to its nearest seed. Components
    without a seed (``N < K``) start empty.
    """
    n = x.shape[0]
    seeds = [int(torch.randint(n, (1,), generator=generator))]
    dist = ((x - x[seeds[0]]) ** 2).sum(-1)
    for _ in range(1, min(K, n)):
        total = dist.sum()
        probs = dist / total if bool(total > 0) else torch.full_like(dist, 1.0 / n)
        idx = int(torch.multinomial(probs.cpu().float(), 1, generator=generator))
        seeds.append(idx)
        dist = torch.minimum(dist, ((x - x[idx]) ** 2).sum(-1))
    centers = x[seeds]
    nearest = torch.cdist(x, centers).argmin(-1)
    resp = torch.zeros((n, K), dtype=x.dtype, device=x.device)
    resp[torch.arange(n, device=x.device), nearest] = 1.0
    return resp


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


def initial_summary(family, source, order, K, init="kmeans++", init_items=10_000, seed=0):
    """The summary of initial responsibilities on the first batches of ``order`` holding at
    least ``init_items`` items: ``(summary, items)``, where ``items`` is how many it covers."""
    import numpy as np

    from ..summaries import Summary

    parts, count = [], 0
    for b in order:
        batch = source.batch(int(b))
        parts.append(family.check_data(batch if torch.is_tensor(batch) else np.asarray(batch)))
        count += parts[-1].shape[0]
        if count >= init_items:
            break
    x = torch.cat(parts)
    resp = initial_responsibilities(x, K, init, seed)
    return Summary.from_responsibilities(family, x, resp), x.shape[0]
