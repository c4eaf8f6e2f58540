"""The shapes a saved posterior's tensors and summaries must have: one check for model files
(:func:`~pyro_memo.model_file.load_model`) and checkpoints (:func:`~pyro_memo.memo.checkpoint.load_state`).

A hand-edited file (checksums valid) whose tensors disagree with each other loaded, then failed at
prediction or resume with torch's "The size of tensor a (3) must match the size of tensor b (2)".
The posteriors are told apart by their fields (a DP mixture's ``eta1`` and ``component``, an HDP topic
model's ``lam``, a relational model's ``theta`` and ``w_a``), so this module needs none of the classes of
the layers above it.
"""

from ..summaries import Summary


def posterior_shapes(post, summaries):
    """``(expected, found, sizes)`` of ``post``'s tensors and of each summary in ``summaries`` (a dict
    label -> summary, its tensors named ``"{label} counts"`` ...; ``None`` entries are skipped), or ``None``
    for a posterior of no kind this module knows. ``sizes`` says where ``K`` (and ``D`` / ``V``) came from."""
    summaries = {label: s for label, s in summaries.items() if s is not None}
    if hasattr(post, "eta1") and hasattr(post, "component") and hasattr(post, "family"):
        return _mixture_shapes(post, summaries)
    if hasattr(post, "lam") and hasattr(post, "rho") and getattr(post.lam, "dim", lambda: 0)() == 2:
        return _topic_shapes(post, summaries)
    if all(getattr(post, name, None) is not None for name in ("rho", "omega", "w_a", "w_b")) and hasattr(post, "theta"):
        # (a stochastic a-MMSB posterior has no sticks: not checked)
        return _relational_shapes(post)
    return None


def shape_mismatches(expected, found):
    """One line per tensor of ``found`` whose shape is not ``expected``'s (or is missing, or unexpected)."""
    wrong = [f"{name} is {tuple(found[name]) if name in found else 'missing'}, expected {shape}"
             for name, shape in expected.items() if name not in found or tuple(found[name]) != shape]
    return wrong + [f"{name} is unexpected" for name in found if name not in expected]


def _mixture_shapes(post, summaries):
    """A DP mixture's: ``K`` from ``eta1``; each component parameter has its prior's shape after ``K`` (``D``
    from the prior), each summary statistic the shape the family gives ``K`` components."""
    K, prior = post.K, post.family.prior
    zeros = Summary.zeros(post.family, K)
    expected = {"eta0": (K,), **{f"component {k!r}": (K, *prior[k].shape) for k in prior}}
    found = {"eta0": post.eta0.shape, **{f"component {k!r}": v.shape for k, v in post.component.items()}}
    for label, summary in summaries.items():
        expected.update({f"{label} counts": (K,), f"{label} entropy": (K,),
                         **{f"{label} stats {k!r}": tuple(v.shape) for k, v in zeros.stats.items()}})
        found.update({f"{label} counts": summary.counts.shape, f"{label} entropy": summary.entropy.shape,
                      **{f"{label} stats {k!r}": v.shape for k, v in summary.stats.items()}})
    if getattr(post, "q_alpha", None) is not None:
        expected["q_alpha"], found["q_alpha"] = (2,), post.q_alpha.shape
    return expected, found, f"K = {K} components from eta1, D = {post.family.dim} from the family's prior"


def _topic_shapes(post, summaries):
    """An HDP topic model's: ``K`` topics from ``lam``'s rows, ``V`` words from its columns."""
    K, V = post.lam.shape
    expected = {"rho": (K,), "omega": (K,)}
    found = {"rho": post.rho.shape, "omega": post.omega.shape}
    for label, summary in summaries.items():
        fields = {"word_counts": (K, V), "sum_log_pi": (K + 1,), "doc_term": (), "entropy": (K,)}
        expected.update({f"{label} {name}": shape for name, shape in fields.items()})
        found.update({f"{label} {name}": getattr(summary, name).shape for name in fields})
    return expected, found, f"K = {K} topics and V = {V} words from lam"


def _relational_shapes(post):
    """An HDP relational model's globals (its pair summaries are not checked): ``K`` communities from ``rho``,
    ``N`` nodes from ``theta``'s rows (where it keeps them)."""
    K = post.rho.shape[0]
    expected = {"omega": (K,), "w_a": (K,), "w_b": (K,)}
    if post.theta is not None:  # a stochastic AMMSB posterior keeps no memberships
        expected["theta"] = (post.theta.shape[0], K + 1)
    found = {name: getattr(post, name).shape for name in expected}
    return expected, found, f"K = {K} communities from rho"
