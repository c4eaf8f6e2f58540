"""What the benchmark scripts share: their command line, exact scoring, and the scikit-learn and Pyro SVI
runners. Benchmarks import only the public API of ``pyro_memo``; optional peers (gensim, tomotopy, bnpy)
are imported inside the functions that use them, so every script imports without them."""

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import pyro_memo as pm

#: the photographs of scenes and textures among scikit-image's bundled ones, which the denoising benchmarks train
#: on (``bench_denoise.py --train natural``; no scans of text, micrographs or star fields, and not ``camera``)
NATURAL_PHOTOGRAPHS = ("astronaut", "chelsea", "coffee", "rocket", "brick", "grass", "gravel", "clock", "coins", "moon")


def epll_variant(noisy, prior, sigma, betas, lam_scale=1.0, zstep="map", rounds=1):
    """:func:`~pyro_memo.denoising.epll_denoise` with the z-step ``zstep`` (``"map"`` or ``"mmse"``), ``rounds``
    x/z rounds per beta of ``betas`` (in units of sigma^-2; each beta repeated) and lambda scaled by ``lam_scale``."""
    from pyro_memo.denoising import epll_denoise

    var = sigma**2
    schedule = [b / var for b in betas for _ in range(rounds)]
    return epll_denoise(noisy, prior, sigma, betas=schedule, lam=64 / var * lam_scale, z_step=zstep)


def make_parser(doc):
    """An argument parser whose help is the script's docstring ``doc``, kept as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_condition_arguments(parser):
    """``--threads``, ``--busy`` and the hidden ``--child`` of a script that runs each condition (threads x
    beside a CPU-bound process or not) in a fresh process (:func:`run_isolated`) that calls back with ``--child``."""
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--busy", default="no,yes", help="beside a CPU-bound process: no, yes or both")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def conditions(args):
    """``(threads, busy)`` for each condition of ``args.threads`` x ``args.busy``
    (:func:`add_condition_arguments`), threads outermost."""
    for threads in (int(t) for t in args.threads.split(",")):
        for busy in (b == "yes" for b in args.busy.split(",")):
            yield threads, busy


def document_split(corpus=None):
    """``(corpus, train, test)``: ``corpus`` (default: the 7,961-document Wikipedia corpus of the bnpy 0.1.7
    sdist) and the split every topic benchmark scores on, 20% of the documents held out (seed 0)."""
    from pyro_memo.data import fetch_wikipedia
    from pyro_memo.topics import split_documents

    corpus = fetch_wikipedia() if corpus is None else corpus
    return (corpus, *split_documents(corpus, 0.2, seed=0))


def save_topic_posterior(posterior, path):
    """Save a topic posterior's globals (``bench_hdp_wiki.py --save``, ``bench_lda_wiki.py --save``)."""
    import torch

    p = posterior
    torch.save({"lam": p.lam, "rho": p.rho, "omega": p.omega, "alpha": float(p.alpha), "gamma": float(p.gamma),
                "lam0": float(p.lam0)}, path)


def load_topic_posterior(path):
    """A posterior saved by :func:`save_topic_posterior`."""
    import torch

    from pyro_memo.topics import HDPPosterior

    saved = torch.load(path)
    return HDPPosterior(saved["lam"], saved["rho"], saved["omega"], saved["alpha"], saved["gamma"], saved["lam0"])


def add_toy_arguments(parser):
    """The paper's toy fit (000 §4.1): ``--n`` items, ``--K``, ``--batches``, ``--laps``, ``--seed``."""
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--K", type=int, default=25)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--laps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def exact_elbo(posterior, x, batch=5000):
    """Exact ELBO of ``posterior``'s globals with optimal local factors (Hughes & Sudderth 2013, eq. 8), by
    :func:`pyro_memo.full_data_elbo` over consecutive batches of ``batch`` rows of ``x``."""
    source = pm.make_batches([x[lo:lo + batch] for lo in range(0, len(x), batch)])
    return pm.full_data_elbo(posterior, source)[0]


def sklearn_bgm(K, seed, covariance="full", weight_concentration_prior=None):
    """scikit-learn's DP ``BayesianGaussianMixture`` set up for one timed EM iteration per ``fit`` call
    (``max_iter=1``, ``warm_start``, k-means++ start); ``weight_concentration_prior=None`` is scikit-learn's
    default, ``1 / K``."""
    from sklearn.mixture import BayesianGaussianMixture

    return BayesianGaussianMixture(n_components=K, weight_concentration_prior_type="dirichlet_process",
                                   weight_concentration_prior=weight_concentration_prior,
                                   covariance_type=covariance, max_iter=1, warm_start=True,
                                   init_params="k-means++", random_state=seed)


def bgm_iterations(bgm, x, stop, after=None):
    """Run EM iterations of :func:`sklearn_bgm`'s model on the array ``x`` until ``stop(seconds)`` is true
    (checked before each iteration), timing each ``fit`` call; ``after(bgm)`` runs after each, untimed.

    :returns: the list of per-iteration seconds.
    """
    from sklearn.exceptions import ConvergenceWarning

    seconds = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        while not stop(seconds):
            start = time.perf_counter()
            bgm.fit(x)
            seconds.append(time.perf_counter() - start)
            if after is not None:
                after(bgm)
    return seconds


def pyro_svi_trace(x, family, K, batches, epochs, lr, seed):
    """Pyro ``SVI`` with ``TraceEnum_ELBO`` and Adam (:class:`pyro_memo.PyroSVI`) for ``epochs`` epochs of
    ``batches`` minibatches, its globals scored by :func:`exact_elbo` after every epoch, untimed.

    :returns: ``(per-epoch seconds, per-epoch exact ELBO)``.
    """
    trace = []

    def callback(epoch, elbo, posterior):
        trace.append(exact_elbo(posterior, x))

    result = pm.PyroSVI(family, K, loss="TraceEnum_ELBO", lr=lr, laps=epochs, seed=seed, score=False).fit(
        x, num_batches=batches, callback=callback)
    return result.lap_seconds, trace


BUSY = "while True:\n    pass\n"


def child_env(threads):
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(threads)
    return env


def run_isolated(command, threads, busy):
    """Run ``command`` in a fresh process whose thread pools are capped at ``threads``, beside a pure-Python
    CPU-bound process when ``busy``; returns the JSON object its last line of output prints."""
    hog = subprocess.Popen([sys.executable, "-c", BUSY]) if busy else None
    try:
        done = subprocess.run(command, env=child_env(threads), capture_output=True, text=True, check=False)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def paired(more, one):
    """With two or more repetitions: the per-repetition ratios (each repetition runs the two conditions
    back to back), their mean and its standard error, which says whether the difference is more than the
    machine's drift between runs."""
    if len(more) < 2:
        return ""
    import numpy as np

    ratios = np.asarray(more) / np.asarray(one)
    error = ratios.std(ddof=1) / np.sqrt(len(ratios))
    return (f"; per repetition {' '.join(f'{r:.2f}' for r in ratios)}, "
            f"mean {ratios.mean():.3f} +- {error:.3f} (standard error)")


def mean_lap(state):
    """Mean lap seconds of a fit's state from lap 2 on (lap 1 when it is the only one)."""
    seconds = state.lap_seconds[1:] or state.lap_seconds
    return sum(seconds) / len(seconds)


def report_dense_sparse(dense, sparse, L, objective="ELBO", label=None):
    """Print the mean laps of a dense and a sparse (top-``L``) fit's states, their ratio, and the final
    ``objective`` of each with their relative difference (``label``: the sparse fit's name)."""
    ratio = mean_lap(dense) / mean_lap(sparse)
    d, s = dense.elbo_trace[-1], sparse.elbo_trace[-1]
    rel = (s - d) / abs(d)
    label = label or f"sparse L={L}"
    print(f"mean lap (from lap 2): dense {mean_lap(dense):.2f} s, {label} {mean_lap(sparse):.2f} s; "
          f"dense / sparse = {ratio:.2f}x")
    print(f"final {objective}: dense {d:.8e}, sparse {s:.8e}; (sparse - dense) / |dense| = {rel:+.2e} "
          f"({100 * rel:+.4f}%)")
