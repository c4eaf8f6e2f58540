"""``pyro-memo predict MODEL DATA``: labels and log densities of new data under a saved model
(the ``model.pt`` that ``fit --save DIR`` writes; see :func:`pyro_memo.save_model`).

The model decides how DATA is read: a DP mixture takes what ``fit --model dp`` takes (an
``(N, D)`` .npy / .npz array or a bundled dataset), the HDP topic model a corpus. Options and
paths are checked before torch is imported.
"""

import os

#: the file ``fit --save DIR`` writes the model to
MODEL_FILE = "model.pt"
#: the default output, beside the model file
DEFAULT_OUT = "predictions.npz"


def add_predict_command(sub):
    """Add the ``predict`` parser to the ``sub`` parsers."""
    parser = sub.add_parser(
        "predict", help="label and score new data with a saved model",
        description="Label and score DATA with a model saved by 'pyro-memo fit --save DIR' (DIR/model.pt). A DP "
                    "mixture writes labels (the most responsible component) and log_density (the log predictive "
                    "density of each item); the HDP topic model writes, per document, topic_proportions (K + 1 "
                    "columns, the last the mass beyond the truncation), log_likelihood (nats, topics fixed) and "
                    "labels (the biggest topic). Prints a one-line summary.")
    parser.add_argument("model", metavar="MODEL", help="a model file (model.pt) or a folder holding one.")
    parser.add_argument("data", metavar="DATA",
                        help="the data, as 'fit' reads it for the saved model: a .npy / .npz array of shape (N, D) "
                             "(or a bundled dataset) for a DP mixture, a corpus (.ldac, .npz counts, or a bundled "
                             "one) for the HDP.")
    parser.add_argument("--out", metavar="FILE", default=None,
                        help=f"the .npz file to write. Default: {DEFAULT_OUT} beside the model file.")
    return parser


def _is_relational_checkpoint(path):
    """Whether the checkpoint ``path`` is a ``--model relational`` fit's, read without torch (its
    pickle names the posterior's class); ``False`` when it cannot be read."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            pickle = next((n for n in archive.namelist() if n.endswith("/data.pkl")), None)
            return pickle is not None and b"RelationalPosterior" in archive.read(pickle)
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False


#: what each command that reads a model file reads, for the error of a folder that holds none
READS = {"predict": "the model.pt of a DP mixture or an HDP topic model",
         "denoise": "the model.pt of a DP mixture fitted with --family zm-gauss to image patches"}


def _no_model_file(model, option="MODEL", command="predict"):
    """Why the folder ``model`` (``command``'s ``option``) holds no model file, in one sentence."""
    state = os.path.join(model, "state.pt")
    if os.path.isfile(state) and _is_relational_checkpoint(state):
        return (f"{option} {model}: a --model relational fit, which {command} does not read (it reads "
                f"{READS[command]}): take its memberships and labels from {model}/posterior.npz, "
                "or read state.pt with pyro_memo.load_state and score node pairs with "
                "pyro_memo.relational.link_prediction")
    if os.path.isfile(state):
        return (f"{option} {model}: no {MODEL_FILE} there, only the checkpoint state.pt of a fit that did not finish "
                f"(finish it with the same pyro-memo fit command and --resume {model} --save {model})")
    if os.path.isfile(os.path.join(model, "posterior.npz")):  # the only fit that writes it without model.pt
        return (f"{option} {model}: no {MODEL_FILE} there: a --model hdp --algo memory-bounded fit writes none, "
                f"which {command} does not read (it reads {READS[command]}); take its weights, labels and "
                f"component estimates from {model}/posterior.npz")
    return f"{option} {model}: no {MODEL_FILE} there (write one with pyro-memo fit --save {model})"


def model_path(model, option="MODEL", command="predict"):
    """The model file ``model`` names (a file, or a folder holding ``model.pt``); errors name ``command``'s
    ``option`` that gave it."""
    if os.path.isdir(model):
        path = os.path.join(model, MODEL_FILE)
        if not os.path.isfile(path):
            raise ValueError(_no_model_file(model, option, command))
        return path
    if not os.path.exists(model):
        raise ValueError(f"{option} {model}: no such file or folder")
    return model


def check(args):
    """Resolve the model file and the output, and check both before anything heavy is imported."""
    from .common import FIT_FILES, check_output_file

    args.model_file = model_path(args.model)
    if args.out is None:
        args.out = os.path.join(os.path.dirname(os.path.abspath(args.model_file)), DEFAULT_OUT)
    if not args.out.endswith(".npz"):
        raise ValueError(f"--out {args.out}: the predictions are written as an .npz file; give a name ending in .npz")
    check_output_file(args.out, "--out")
    target = os.path.realpath(args.out)
    if target in {os.path.realpath(args.model_file), os.path.realpath(args.data)}:
        raise ValueError(f"--out {args.out}: names the model or the data file; choose another path")
    if os.path.dirname(target) == os.path.dirname(os.path.realpath(args.model_file)) and \
            os.path.basename(target) in FIT_FILES:
        raise ValueError(f"--out {args.out}: names a file the fit beside the model wrote; choose another path")


def _write_npz(path, arrays):
    import numpy as np

    from ..data.files import write_atomically

    def write(tmp):
        with open(tmp, "wb") as fh:  # a handle: np.savez would append ".npz" to the temporary name
            np.savez(fh, **arrays)

    write_atomically(path, write)


def _mixture(args, model):
    from ..datasets import load_dataset

    x_np, _, _ = load_dataset(args.data)
    try:
        x = model.check_data(x_np)
    except ValueError as err:
        raise ValueError(f"{args.data}: {err} (the model {args.model_file} was fitted to {model.family.dim} "
                         "columns)") from None
    labels = model.predict(x).cpu().numpy()
    log_density = model.score_samples(x).cpu().numpy()
    _write_npz(args.out, {"labels": labels, "log_density": log_density})
    return (f"{len(labels)} items of {args.data}: {len(set(labels.tolist()))} of {model.K} components used, mean "
            f"log density {log_density.mean():.4f} nats; labels, log_density written to {args.out}")


def _topics(args, model):
    from .models.hdp import load_corpus

    corpus, _ = load_corpus(args.data)
    if args.data.endswith(".npz") and corpus.vocab_size != model.V:  # a count matrix: one column per word
        raise ValueError(f"{args.data}: X has {corpus.vocab_size} features, but the model {args.model_file} is "
                         f"expecting {model.V} features as input (a count matrix has one column per word of the "
                         "model's vocabulary)")
    try:
        model.check_corpus(corpus)
    except ValueError as err:
        raise ValueError(f"{args.data}: {err}") from None
    proportions = model.predict_proba(corpus)
    log_lik = model.score_samples(corpus).cpu().numpy()
    labels = proportions[:, :-1].argmax(-1).cpu().numpy()
    _write_npz(args.out, {"topic_proportions": proportions.cpu().numpy(), "log_likelihood": log_lik,
                          "labels": labels})
    if corpus.num_tokens > 0:
        score = f"log-likelihood {log_lik.sum() / corpus.num_tokens:.4f} per token under {model.K} topics"
    else:  # a per-token score of no tokens is undefined, not 0
        score = (f"every document is empty, no tokens to score (no log-likelihood per token; each document gets "
                 f"the prior's proportions of the {model.K} topics)")
    return (f"{corpus.num_docs} documents of {args.data}: {score}; topic_proportions, log_likelihood, labels "
            f"written to {args.out}")


def run_predict(args):
    """Run ``pyro-memo predict``; returns the exit status (errors raise :class:`ValueError`)."""
    check(args)
    from ..model_file import load_model

    model = load_model(args.model_file)
    print(_mixture(args, model) if model.kind == "dp-mixture" else _topics(args, model))
    return 0
