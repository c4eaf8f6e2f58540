"""Saved tensors against the shapes their posterior declares: one check for model files
(:func:`~pyro_memo.model_file.load_model`) and checkpoints (:func:`~pyro_memo.memo.checkpoint.load_state`).

A hand-edited file (checksums valid) whose tensors disagree with each other loaded, then failed at
prediction or resume with torch's "The size of tensor a (3) must match the size of tensor b (2)". Each
posterior declares the shapes (:meth:`~pyro_memo.posterior.VariationalPosterior.tensor_shapes`).
"""


def shape_problems(post, summaries):
    """``(sizes, lines)``: one line per tensor of ``post`` or of the summaries (label -> summary, ``None``
    entries skipped) whose shape is not the one ``post`` declares (or is missing, or unexpected), and where the
    sizes came from; ``None`` when every shape agrees or ``post`` declares none."""
    shapes = post.tensor_shapes(summaries)
    if shapes is None:
        return None
    expected, found, sizes = shapes
    wrong = [f"{name} is {tuple(found[name]) if name in found else 'missing'}, expected {shape}"
             for name, shape in expected.items() if name not in found or tuple(found[name]) != shape]
    wrong += [f"{name} is unexpected" for name in found if name not in expected]
    return (sizes, wrong) if wrong else None
