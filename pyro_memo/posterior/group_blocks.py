"""Items packed by group for the group-level local step of an HDP.

Each sweep of the group-level coordinate ascent needs, for every group :math:`d` and component
:math:`k`, :math:`N_{dk} = w_{dk} \\sum_{n \\in d} c_n \\Phi_{nk} / z_n` with
:math:`z_n = \\sum_k \\Phi_{nk} w_{dk}`. Computed on the flat ``(T, K)`` items it gathers the
group weights to every item and scatters back: several ``(T, K)`` temporaries a sweep. Here the
groups are sorted by size and packed, as many as fit in a cache-sized block, into zero-padded
blocks ``(B, T_max, K)``, so both sums are batched matrix-vector products (``torch.bmm``) with no
temporary of the items' size; sorting keeps the padding small (a few percent on documents).
"""

import torch

from ..families import SparseResponsibilities

#: the most numbers ``B * T_max * K`` in a block on a CPU (2 MiB of float64): the second product of a sweep
#: then rereads the block from the processor's cache
BLOCK_ELEMENTS = 2**18
#: the same on an accelerator, where each block costs kernel launches and no cache argument holds
ACCELERATOR_BLOCK_ELEMENTS = 2**22


def default_block_elements(device):
    """:data:`BLOCK_ELEMENTS` on a CPU, :data:`ACCELERATOR_BLOCK_ELEMENTS` elsewhere."""
    return BLOCK_ELEMENTS if device.type == "cpu" else ACCELERATOR_BLOCK_ELEMENTS


def row_slices(values):
    """Slices of consecutive rows of ``values`` ``(T, K)``, each of at most :func:`default_block_elements` numbers: the
    chunks in which an item-wise pass over a ``(T, K)`` table stays in the processor's cache and needs no
    temporary of the table's size (on this project's CPU a fresh 80 MB tensor costs 0.07 s of page faults,
    five times the arithmetic of one pass over it)."""
    step = max(1, default_block_elements(values.device) // max(values.shape[-1], 1))
    return [slice(start, start + step) for start in range(0, values.shape[0], step)]


def _runs(sorted_sizes, max_rows):
    """``(start, stop)`` of consecutive runs of groups whose ``sorted_sizes`` ascend, each run as long as
    ``(stop - start) * sorted_sizes[stop - 1] <= max_rows``, or of one group."""
    start = 0
    for stop, size in enumerate(sorted_sizes):
        if stop > start and (stop - start + 1) * size > max_rows:
            yield start, stop
            start = stop
    if start < len(sorted_sizes):
        yield start, len(sorted_sizes)


class GroupBlocks:
    """The items' ``(T, K)`` ``values`` and ``(T,)`` ``count`` in blocks of groups of similar size,
    each of at most ``block_elements`` numbers (or one group; default :data:`BLOCK_ELEMENTS` on a CPU,
    :data:`ACCELERATOR_BLOCK_ELEMENTS` elsewhere); padding rows are zero.

    :param values: ``(T, K)`` per-item component likelihoods :math:`\\Phi`; with ``index``, a table of
        rows that items share (the topic model's ``(V, K)`` word table).
    :param group: ``(T,)`` group of each item, ``0 .. num_groups - 1`` (any order).
    :param count: ``(T,)`` multiplicity of each item.
    :param index: ``(T,)`` the row of ``values`` of each item (word ids); ``None``: row ``n`` for item ``n``.
    """

    def __init__(self, values, group, count, num_groups, block_elements=None, index=None):
        if block_elements is None:
            block_elements = default_block_elements(values.device)
        sizes = torch.bincount(group, minlength=num_groups)
        order = torch.argsort(group, stable=True)
        starts = torch.cumsum(sizes, 0) - sizes
        by_size = torch.argsort(sizes, stable=True)
        sorted_sizes = sizes[by_size].tolist()
        self._no_groups = by_size[:0]
        parts = []
        for start, stop in _runs(sorted_sizes, max(block_elements // max(values.shape[1], 1), 1)):
            groups, width = by_size[start:stop], sorted_sizes[stop - 1]
            offset = torch.arange(width, device=group.device)
            rows = order[(starts[groups, None] + offset).clamp_max(len(order) - 1)] if width else \
                offset.new_zeros(len(groups), 0)
            parts.append((groups, rows, offset >= sizes[groups, None]))
        # one gather into one tensor, the blocks views of it: freed at once (no allocator holding the pieces);
        # padding rows repeat a real item and are zeroed, so no padded copy of ``values`` is needed
        rows = torch.cat([r.flatten() for _, r, _ in parts]) if parts else order[:0]
        gathered = values.index_select(0, rows if index is None else index[rows])
        self.blocks, first = [], 0
        for groups, rows, padding in parts:
            block = gathered[first:first + rows.numel()].view(*rows.shape, values.shape[1])
            first += rows.numel()
            block_count = count[rows].masked_fill_(padding, 0)
            self.blocks.append((groups, block.masked_fill_(padding[..., None], 0), block_count))

    @property
    def groups(self):
        """``(G,)`` the groups of the blocks, in the order of :meth:`counts`' rows."""
        return torch.cat([self._no_groups, *(groups for groups, _, _ in self.blocks)])

    def keep(self, mask):
        """Keep only the groups where ``mask`` (``(G,)``, in :attr:`groups` order) holds; drops empty blocks."""
        kept, first = [], 0
        for groups, values, count in self.blocks:
            part = mask[first:first + len(groups)]
            first += len(groups)
            if bool(part.all()):
                kept.append((groups, values, count))
            elif bool(part.any()):
                kept.append((groups[part], values[part], count[part]))
        self.blocks = kept

    def counts(self, weights, L=None, log_norm=False):
        """``(G, K)`` :math:`N_{dk}` of the module docstring for the groups of :attr:`groups`, given their
        ``(G, K)`` ``weights`` :math:`w_{dk}` (same order). With ``L``, each item's responsibilities are
        its ``L`` largest, renormalised
        (:meth:`~pyro_memo.families.SparseResponsibilities.top_weights`). With ``log_norm`` (dense only),
        ``(counts, log_norms)``, ``log_norms`` ``(G,)`` each group's :math:`\\sum_n c_n \\log z_n` in float64."""
        if log_norm and L is not None:
            raise ValueError("log_norm is computed for dense responsibilities only")
        out, norms, first = [], [], 0
        tiny = torch.finfo(weights.dtype).tiny
        for groups, values, count in self.blocks:
            w = weights[first:first + len(groups)]
            first += len(groups)
            if L is None:
                z = torch.bmm(values, w[:, :, None]).squeeze(-1).clamp_min(tiny)
                out.append(w * torch.bmm((count / z)[:, None, :], values).squeeze(1))
                if log_norm:  # padding rows: count 0, z tiny
                    norms.append((count * z.log()).sum(1, dtype=torch.float64))
            else:
                B, width, K = values.shape
                top = SparseResponsibilities.top_weights((values * w[:, None, :]).view(-1, K), L)
                rows = torch.arange(B, device=values.device).repeat_interleave(width)
                out.append(top.scaled(count.reshape(-1)).table(rows, B))
        counts = torch.cat(out) if out else weights.new_zeros(0, weights.shape[1])
        if not log_norm:
            return counts
        return counts, torch.cat(norms) if norms else weights.new_zeros(0, dtype=torch.float64)
