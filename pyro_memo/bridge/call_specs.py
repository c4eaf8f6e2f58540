"""A guide's reading of its model, one per call signature: the model as :func:`~.recognition.recognize_model`
reads it from a call's arguments, kept for the calls alike (shared by the three guides)."""

from .recognition import ModelStructureError, recognize_model
from .structure import adds_arguments, call_signature

#: each model kind, as an error names it, and the guide that takes it
MODEL_KINDS = {"dp": ("a DP mixture", "DPMixtureGuide"), "hdp": ("an HDP topic model", "HDPGuide"),
               "relational": ("an HDP relational model", "RelationalGuide")}


def check_kind(spec, kind, guide_name):
    """Raise :class:`~.structure.ModelStructureError` unless ``spec`` (a recognised model) is of ``kind``,
    naming the kind it is and the guide that takes it."""
    if spec.kind != kind:
        found, guide = MODEL_KINDS.get(spec.kind, (f"'{spec.kind}'", "DPMixtureGuide"))
        raise ModelStructureError(f"{guide_name} needs {MODEL_KINDS[kind][0]}; this model is {found}: use "
                                  f"pyro_memo.{guide}")
    return spec


def spec_for_call(guide, kind, args, kwargs):
    """The spec of ``guide.model`` for a call with ``args`` / ``kwargs``, from ``guide._specs`` (call signature ->
    spec) or recognised now (and checked to be of ``kind``). A call that adds no argument to one read before
    (e.g. ``Predictive``'s call without the data) takes the model as read from that call (whatever calls came in
    between: after a call without the words and the number of documents, a call without the words alone was
    read again and refused for observing nothing); one that adds arguments to every call read before (the
    batch's indices) is read again."""
    key, specs = call_signature(args, kwargs), guide._specs
    if key not in specs:
        read = [k for k in specs if not adds_arguments(key, k)]
        if read:
            specs[key] = specs[read[-1]]
    if key not in specs:
        specs[key] = check_kind(recognize_model(guide.model, *args, **kwargs), kind, type(guide).__name__)
    return specs[key]
