"""Options shared by the models of ``pyro-memo`` and the checks and output they share."""

import logging
import math
import os
import sys
import tempfile
from contextlib import contextmanager

from .interrupt import kept_from_children
from .registry import Option, register_option

THREADS_HELP = ("the most threads a run may use: torch's intra-op threads (each memoized, full-batch or stochastic "
                "fit, and each denoiser, times one thread against this many and keeps the faster, so a busy "
                "machine does not slow it down) and the BLAS / OpenMP threads of numpy and the baselines. "
                "Never more than the cores the process may use. Default: torch's setting (the number of cores, "
                "or OMP_NUM_THREADS).")


def _register_shared():
    """The options more than one model takes (a model registers its own in its module)."""
    for option in (
        Option("data", "the data to fit.", {"nargs": "?", "metavar": "DATA"}),
        Option("--algo", "inference algorithm."),
        Option("--K", "truncation level: the number of components (topics for hdp).", {"type": int}),
        Option("--batches", "number of fixed batches of memoized inference.", {"type": int}),
        Option("--laps", "maximum passes through the data.", {"type": int}),
        Option("--tol", "stop when the exact ELBO's relative change over a lap is below this.", {"type": float}),
        Option("--alpha", "concentration.", {"type": float, "metavar": "ALPHA"}),
        Option("--init", "initialisation."),
        Option("--init-items", "initialise from at most N items, drawn by --seed (all of them when there are fewer): "
               "k-means++ over more items costs a longer start and may reach another local optimum.",
               {"type": int, "metavar": "N"}),
        Option("--seed", "seed of initialisation and batch order.", {"type": int}),
        Option("--device", "torch device: cpu, cuda, cuda:1, ...", {"metavar": "DEV"}),
        Option("--dtype", "floating type of the variational math."),
        Option("--local-dtype", "mixed precision: the floating type of the local step alone (float32: "
               "responsibilities and batch summaries in float32; the globals, the memo and the exact ELBO stay in "
               "--dtype). Default: --dtype.", {"metavar": "TYPE"}),
        Option("--sparse-L", "keep only each item's L largest responsibilities, renormalised over them "
               "(Hughes & Sudderth 2016): the summaries then cost O(N L) instead of O(N K) family terms, and the "
               "ELBO stays exact for that sparse posterior; L >= --K is dense.", {"type": int, "metavar": "L"}),
        Option("--sparse-candidates", "with --sparse-L, search each item's L components among its candidates only: "
               "the components of the last supports of the items of its batch that share its most probable one, plus "
               "R drawn at random per such group (carried from lap to lap; the exact ELBO still never falls).",
               {"type": int, "metavar": "R"}),
        Option("--moves", "comma-separated moves, each accepted only on an exact full-data ELBO increase.",
               {"metavar": "LIST"}),
        Option("--workers", "run the local steps on a Dask LocalCluster of N single-threaded worker processes, "
               "with the parallel lap schedule (rounds of batches against the same globals): --workers 1 and "
               "--workers 2 give the same result. Needs pip install 'pyro-memo[dask]'.", {"type": int, "metavar": "N"}),
        Option("--scheduler", "run the local steps on the workers of a running Dask scheduler (tcp://HOST:PORT), "
               "with the parallel lap schedule.", {"metavar": "ADDRESS"}),
        Option("--round-size", "batches per round of the parallel schedule, which this option selects also without "
               "--workers (default with --workers / --scheduler: the whole lap, one global update per lap; smaller "
               "rounds update the globals more often).", {"type": int, "metavar": "R"}),
        Option("--json", "write the results as JSON to PATH.", {"metavar": "PATH"}),
        Option("--save", "write the fitted model's files to DIR.", {"metavar": "DIR"}),
        Option("--resume", "continue a memoized fit from DIR/state.pt (same DATA; --laps counts all laps); it writes "
               "checkpoints only with --save (--resume DIR --save DIR goes on checkpointing there).",
               {"metavar": "DIR"}),
        Option("--quiet", "no progress output.", {"action": "store_true"}),
    ):
        register_option("fit", option)
    for option in (
        Option("data", "the data to compare methods on.", {"nargs": "?", "metavar": "DATA"}),
        Option("--methods", "comma-separated methods.", {"metavar": "LIST"}),
        Option("--seeds", "comma-separated seeds; each method runs once per seed.", {"metavar": "LIST"}),
        Option("--passes", "passes through the data (laps, sweeps) per run.", {"type": float}),
        Option("--seconds", "also stop a run after this many seconds of its own time.", {"type": float}),
        Option("--K", "truncation level shared by the methods.", {"type": int}),
        Option("--batches", "batches per pass for the online methods.", {"type": int}),
        Option("--alpha", "concentration.", {"type": float, "metavar": "ALPHA"}),
        Option("--heldout", "fraction held out for the held-out score.", {"type": float}),
        Option("--out", "output folder.", {"metavar": "DIR"}),
        Option("--quiet", "print only the summary table.", {"action": "store_true"}),
    ):
        register_option("compare", option)


_register_shared()


@contextmanager
def dask_executor(args):
    """The ``dask.distributed.Client`` of ``--workers N`` (a ``LocalCluster`` of N single-threaded worker
    processes, closed afterwards) or ``--scheduler ADDRESS``, or ``None`` (the fit runs in this process)."""
    workers, address = getattr(args, "workers", None), getattr(args, "scheduler", None)
    if workers is None and not address:
        yield None
        return
    if workers is not None and address:
        raise ValueError("give --workers N (a local cluster) or --scheduler ADDRESS (a running one), not both")
    if workers is not None and workers < 1:
        raise ValueError(f"--workers {workers}: give a positive number of workers")
    try:
        import distributed
    except ImportError:
        raise ValueError("--workers / --scheduler need Dask: pip install 'pyro-memo[dask]'") from None
    if address:
        with client_of(distributed, address) as client:
            yield client
        return
    with kept_from_children():  # a Ctrl-C to the process group must not kill the workers mid-lap
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                           dashboard_address=":0", silence_logs=logging.ERROR)
    with cluster, distributed.Client(cluster) as client:
        yield client


def client_of(distributed, address):
    """A ``distributed.Client`` of the scheduler at ``address`` (``--scheduler``).

    :raises ValueError: naming ``--scheduler`` when none answers there within 10 s, and when ``address`` is no
        scheduler address Dask can use (no port, an unknown scheme, ``tls://`` without a security
        configuration: Dask's own ``ValueError`` or ``TypeError`` named neither the option nor the form).
    """
    try:
        return distributed.Client(address, timeout=10)
    except OSError as err:
        raise ValueError(f"--scheduler {address}: cannot reach a Dask scheduler there ({err})") from None
    except (ValueError, TypeError) as err:
        raise ValueError(f"--scheduler {address}: not an address Dask can connect to ({err}); give the running "
                         f"scheduler's address as tcp://HOST:PORT") from None


def add_threads_option(parser, models=()):
    """``--threads N`` on a command's parser: every command takes it, for every model (``models``,
    named in brackets as every option's help names the models that take it)."""
    takers = f"[{', '.join(models)}] " if models else ""
    parser.add_argument("--threads", type=int, default=None, metavar="N", help=takers + THREADS_HELP)


@contextmanager
def thread_limit(threads):
    """Run a command with torch's intra-op threads and the BLAS / OpenMP pools (threadpoolctl) capped at
    ``threads`` (``None``: as they are), and never above the cores the process may use
    (:func:`~pyro_memo.engine.threads.usable_cores`); torch's setting is restored afterwards."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"--threads {threads}: give a positive number of threads")
    import torch
    from threadpoolctl import threadpool_limits

    from ..engine.threads import usable_cores

    threads = min(threads, usable_cores())
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(saved)


def check_positive(args, integers=(), reals=()):
    """Raise a :class:`ValueError` for the first of ``integers`` below 1 or of ``reals`` not
    above 0 (options left unset, ``None``, pass)."""
    for name in integers:
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer; got {value}")
    for name in reals:
        value = getattr(args, name, None)
        if value is not None and not value > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive; got {value}")


#: ``--birth-targets``, shared by the models whose births take it (each says what in its ``Use``)
BIRTH_TARGETS_OPTION = Option("--birth-targets", "with --moves birth: components a birth targets at once; the "
                                                 "birth is kept only if the exact bound rises.",
                              {"type": int, "metavar": "T"})


def birth_options(moves, **options):
    """``move_options`` for a fitter: ``{"birth": options}`` where the ``--moves`` list names birth (its
    options checked against it by the model), else none."""
    return {"birth": options} if "birth" in [m.strip() for m in moves.split(",")] else {}


#: options every model validates alike: integers >= 1, reals > 0, reals >= 0, integers >= 0
POSITIVE_INTEGERS = ("K", "laps", "batches", "init_items", "sparse_L", "round_size", "workers", "birth_targets")
POSITIVE_REALS = ("alpha", "gamma", "lam0", "passes", "seconds", "prior_scale")
NON_NEGATIVE_REALS = ("tol",)
NON_NEGATIVE_INTEGERS = ("seed", "sparse_candidates")
#: the largest seed torch takes
MAX_SEED = 2**63 - 1


def check_numbers(args):
    """Raise a :class:`ValueError` naming the first numeric option out of its range (NaN and
    infinities included; options a command does not have, or left unset, pass)."""
    check_positive(args, integers=POSITIVE_INTEGERS, reals=POSITIVE_REALS)
    for name in POSITIVE_REALS + NON_NEGATIVE_REALS:
        value = getattr(args, name, None)
        if value is not None and not math.isfinite(value):
            raise ValueError(f"--{name.replace('_', '-')} must be a finite number; got {value}")
    for name in NON_NEGATIVE_REALS + NON_NEGATIVE_INTEGERS:
        value = getattr(args, name, None)
        if value is not None and not value >= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be zero or more; got {value}")
    if getattr(args, "sparse_candidates", None) is not None and getattr(args, "sparse_L", None) is None:
        raise ValueError("--sparse-candidates needs --sparse-L: it restricts the search of sparse responsibilities")
    seed = getattr(args, "seed", None)
    if seed is not None and seed > MAX_SEED:
        raise ValueError(f"--seed must be at most {MAX_SEED} (2**63 - 1); got {seed}")
    heldout = getattr(args, "heldout", None)
    if heldout is not None and not 0 <= heldout < 1:
        raise ValueError(f"--heldout must lie in [0, 1); got {heldout}")


def _probe(folder):
    """Raise :class:`OSError` unless a file can be created in ``folder``."""
    fd, path = tempfile.mkstemp(prefix=".pyro-memo-probe-", dir=folder)
    os.close(fd)
    os.remove(path)


def check_output_folder(path, option, created=None):
    """``--save`` / ``--out DIR``: created when missing (with any missing parents), and writable;
    checked before any work is done. The folders it creates are appended to ``created``
    (outermost first), so that a command that fails can remove them again."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{option} {path}: exists and is not a directory")
    missing, folder = [], os.path.abspath(path)
    while folder and not os.path.exists(folder) and folder != os.path.dirname(folder):
        missing.insert(0, folder)
        folder = os.path.dirname(folder)
    try:
        os.makedirs(path, exist_ok=True)
        if created is not None:
            created.extend(missing)
        _probe(path)
    except OSError as err:
        raise ValueError(f"{option} {path}: cannot write there ({err.strerror or err})") from None


def remove_created(folders):
    """Remove the ``folders`` :func:`check_outputs` created, innermost first, where still empty
    (a command that failed leaves no empty output folder behind)."""
    for folder in reversed(folders or ()):
        try:
            os.rmdir(folder)
        except OSError:
            pass


def check_output_file(path, option):
    """``--json PATH``: its folder exists and is writable, and ``PATH`` is not a directory."""
    if os.path.isdir(path):
        raise ValueError(f"{option} {path}: is a directory")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"{option} {path}: the folder {folder} does not exist")
    try:
        _probe(folder)
    except OSError as err:
        raise ValueError(f"{option} {path}: cannot write there ({err.strerror or err})") from None


#: the files ``fit --save DIR`` may write (and ``--resume DIR`` reads), which --json must not overwrite
FIT_FILES = ("state.pt", "model.pt", "posterior.npz", "trace.png", "topics.txt", "topics.npz")


def _check_fit_files(folder):
    """``--save DIR``: none of the files the fit writes there is a directory (the fit would run to
    its end and then fail to write it)."""
    for name in FIT_FILES:
        path = os.path.join(folder, name)
        if os.path.isdir(path):
            raise ValueError(f"--save {folder}: {path} is a directory, where the fit writes its {name}; remove it "
                             "or choose another --save")


def _check_json_is_not_a_fit_file(args):
    """``--json`` must not name a file of ``--save`` / ``--resume DIR`` (it would overwrite the
    checkpoint, say)."""
    target = os.path.realpath(args.json)
    for option in ("save", "resume"):
        folder = getattr(args, option, None)
        if folder and os.path.dirname(target) == os.path.realpath(folder) and os.path.basename(target) in FIT_FILES:
            raise ValueError(f"--json {args.json}: names a file --{option} {folder} holds; choose another path")


def check_not_an_input(path, option, inputs):
    """Raise a :class:`ValueError` if the output ``path`` of ``option`` is one of the files ``inputs``
    names (``(name, path)`` pairs; a ``None`` path or one that is no file passes): writing it would
    destroy that input."""
    target = os.path.realpath(path)
    for name, source in inputs:
        if source and os.path.isfile(source) and os.path.realpath(source) == target:
            raise ValueError(f"{option} {path}: names the input {name}; choose another path")


def _check_inputs_kept(args):
    """Neither ``--json`` nor a file ``--save DIR`` writes is the data (or ``--vocab``, or a file a model reads
    beside DATA: ``args.read_beside``) the command reads, and ``--json`` is not the ``--save`` folder itself."""
    inputs = [("DATA", getattr(args, "data", None)), ("--vocab", getattr(args, "vocab", None)),
              *getattr(args, "read_beside", ())]
    if getattr(args, "json", None):
        check_not_an_input(args.json, "--json", inputs)
        if getattr(args, "save", None) and os.path.realpath(args.json) == os.path.realpath(args.save):
            raise ValueError(f"--json {args.json} and --save {args.save} name the same path: --save is a folder "
                             "for the fit's files, --json a file; choose another path for one")
    if getattr(args, "save", None):
        for name in FIT_FILES:
            check_not_an_input(os.path.join(args.save, name), "--save", inputs)


def check_outputs(args):
    """Every place ``args`` will write to, checked before the command starts."""
    args.created_folders = []
    _check_inputs_kept(args)
    for option in ("save", "out"):
        if getattr(args, option, None):
            check_output_folder(getattr(args, option), f"--{option}", args.created_folders)
    if getattr(args, "save", None):
        _check_fit_files(args.save)
    if getattr(args, "json", None):
        check_output_file(args.json, "--json")
        _check_json_is_not_a_fit_file(args)
    resume = getattr(args, "resume", None)
    if resume and os.path.isfile(resume):
        raise ValueError(f"--resume {resume}: is a file; --resume takes the folder that holds state.pt "
                         f"(--resume {os.path.dirname(resume) or '.'})")
    if resume and not os.path.isfile(os.path.join(resume, "state.pt")):
        raise ValueError(f"--resume {resume}: no state.pt there (write one with --save {resume})")


#: posterior class of a checkpoint -> the --model that wrote it
CHECKPOINT_MODELS = {"DPMixturePosterior": "dp", "HDPPosterior": "hdp", "RelationalPosterior": "relational",
                     "TiedRelationalPosterior": "relational"}


def load_resume(args, model):
    """The :class:`~pyro_memo.MemoState` in ``--resume DIR``/state.pt, which must be one
    ``model`` (a ``--model`` name) wrote; raises a :class:`ValueError` naming the file otherwise."""
    from ..memo import load_state

    path = os.path.join(args.resume, "state.pt")
    state = load_state(path, device=args.device)
    kind = type(state.posterior).__name__
    if CHECKPOINT_MODELS.get(kind) != model:
        written = CHECKPOINT_MODELS.get(kind)
        what = f"a --model {written} checkpoint" if written else f"a checkpoint of {kind}"
        raise ValueError(f"--resume {args.resume}: state.pt is {what}, not one of --model {model}")
    return state


def check_resume_matches(args, saved):
    """Refuse a resume whose options or data differ from the saved fit's: ``saved`` maps an
    option (``"--K"``) or a description (``"items in DATA"``) to ``(given, saved)`` values."""
    for name, (given, was) in saved.items():
        same = math.isclose(given, was, rel_tol=1e-9) if isinstance(given, float) else given == was
        if not same:
            raise ValueError(f"--resume {args.resume}: the saved fit has {name} {was}, this run {given} "
                             f"(resume with the saved run's options and DATA)")


def prior_text(prior):
    """A Gamma prior ``(s1, s2)`` as ``--alpha-prior`` writes it (``"1,0.5"``), or ``"none"``."""
    return "none" if prior is None else ",".join(f"{v:g}" for v in prior)


def given_prior_text(text, option="--alpha-prior"):
    """The prior an ``--alpha-prior`` (or ``--gamma-prior``) value gives, as :func:`prior_text`."""
    return prior_text(parse_alpha_prior(text, option))


def memo_resume_entries(args, state, K):
    """The resume checks every memoized model shares: ``--K`` (the saved fit's ``K``; not with
    ``--moves``, which change it) and ``--batches`` (once batches are cached)."""
    saved = {}
    if not args.moves:
        saved["--K"] = (args.K, K)
    if state.cache.batches:
        saved["--batches"] = (args.batches, len(state.cache.batches))
    return saved


def parse_moves(text, allowed, model):
    """The move names of a ``--moves`` list; raises for a name ``model`` does not offer."""
    names = [m.strip() for m in text.split(",") if m.strip()]
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise ValueError(f"--moves {','.join(unknown)} is not available for --model {model} "
                         f"({', '.join(allowed)})")
    return names


def parse_prior(text, family):
    """``{key: number}`` from a ``--prior`` list ``KEY=NUMBER,...`` for ``family``; raises naming the
    entry for bad syntax, a key the family does not have, a matrix key (its size is set with
    ``--prior-scale``), a key given twice or a number that is not finite."""
    from .names import MATRIX_PRIORS, PRIOR_NAMES

    values = {}
    for entry in (e.strip() for e in (text or "").split(",")):
        if not entry:
            continue
        key, sep, number = (part.strip() for part in entry.partition("="))
        if not sep or not key:
            raise ValueError(f"--prior entries are KEY=NUMBER (e.g. kappa=0.1,nu=30); got '{entry}'")
        if key not in PRIOR_NAMES[family]:
            raise ValueError(f"--prior {key}: the {family} family's priors are {', '.join(PRIOR_NAMES[family])}")
        if key in MATRIX_PRIORS:
            raise ValueError(f"--prior {key}: {key} is a D x D matrix; scale it with --prior-scale")
        if key in values:
            raise ValueError(f"--prior {key} is given twice")
        try:
            values[key] = float(number)
        except ValueError:
            raise ValueError(f"--prior {key}: '{number}' is not a number") from None
        if not math.isfinite(values[key]):
            raise ValueError(f"--prior {key} must be a finite number; got {number}")
    return values


#: ``--alpha-prior``, shared by the models that can learn their concentration alpha
FAMILY_HELP = ("observation family: gauss (full covariance, Normal-Wishart prior), zm-gauss (zero mean, Wishart), "
               "diag-gauss (Normal-Gamma), known-gauss / known-diag-gauss (known full / diagonal covariance `noise`, "
               "Normal prior on the mean), mult (Dirichlet), bern (Beta), poisson (Gamma); default priors are "
               "scaled to the data.")
#: ``--laps`` of the models with memory-bounded VB, whose data are seen once: laps of each epoch's model building
MEMORY_BOUNDED_LAPS = ("with --algo memory-bounded: the most laps of each epoch's model building (the stream "
                       "itself is seen once)")
#: ``fit`` options shared by the models with memory-bounded VB (a DP mixture, the HDP over a family)
MEMORY_BOUNDED_OPTIONS = (
    Option("--family", FAMILY_HELP),
    Option("--memory", "memory-bounded VB: the most numbers the clumps and singlets kept between epochs may take "
                       "(each clump its count and statistics, each singlet its D values; Gomes et al. 2008, eq. 26).",
           {"type": int, "metavar": "M"}),
    Option("--epoch", "memory-bounded VB: items (DP mixture) or groups (HDP) per epoch; each is seen once.",
           {"type": int, "metavar": "E"}),
    Option("--lifetime", "memory-bounded VB: the items expected over the stream's lifetime, which magnifies the data "
                         "when choosing clumps (default: the data's size).", {"type": int, "metavar": "T"}),
)

ALPHA_PRIOR_OPTION = Option("--alpha-prior", "learn the concentration alpha (the DP's; the HDP's document level): "
                            "alpha ~ Gamma(S1, S2) (shape S1, rate S2; prior mean S1 / S2) with its closed-form "
                            "posterior q(alpha) (Blei & Jordan 2006), in place of a fixed --alpha; the summary and "
                            "--json (key alpha) report E[alpha].", {"metavar": "S1,S2"})


def parse_alpha_prior(text, option="--alpha-prior"):
    """``(s1, s2)`` from an ``--alpha-prior S1,S2`` (or ``--gamma-prior``) value: shape and rate of a
    Gamma prior on a concentration; ``None`` for an empty one; raises unless it is two positive finite
    numbers."""
    if text is None or not str(text).strip():
        return None
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    name = option.lstrip("-").split("-")[0]
    if len(values) != 2 or len(parts) != 2:
        raise ValueError(f"{option} takes two numbers S1,S2 (shape and rate of {name}'s Gamma prior, "
                         f"e.g. 1,1); got '{text}'")
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise ValueError(f"{option}: shape and rate must be positive finite numbers; got '{text}'")
    return tuple(values)


def parse_list(text, option, kind=str):
    """A comma-separated list of ``kind`` values; raises for an empty or malformed one."""
    try:
        values = [kind(s.strip()) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"{option} must be comma-separated {kind.__name__} values; got '{text}'") from None
    if not values:
        raise ValueError(f"{option}: give at least one value")
    return values


def _distinct(values, option):
    """``values``, raising for one given twice (its run would repeat another and count twice in the means)."""
    twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
    if twice is not None:
        raise ValueError(f"{option}: {twice} is given twice")
    return values


def parse_seeds(text):
    """The seeds of a ``--seeds`` list: distinct integers in ``[0, 2**63)``."""
    seeds = parse_list(text, "--seeds", int)
    bad = [s for s in seeds if not 0 <= s <= MAX_SEED]
    if bad:
        raise ValueError(f"--seeds: each seed must lie in [0, 2**63 - 1]; got {bad[0]}")
    return _distinct(seeds, "--seeds")


def parse_methods(text, methods, model):
    """The distinct names of a ``--methods`` list; raises for one not registered in ``methods``."""
    names = parse_list(text, "--methods")
    unknown = [m for m in names if m not in methods]
    if unknown:
        raise ValueError(f"--methods: unknown {unknown} for --model {model}; choose from {', '.join(methods)}")
    return _distinct(names, "--methods")


def stop_requested(args):
    """Whether Ctrl-C or SIGTERM asked the running command to stop (see :mod:`.interrupt`): a fit's
    per-lap callback returns this, so the fit ends after the lap and its checkpoint."""
    stop = getattr(args, "stop", None)
    return stop is not None and stop.requested


def say(text):
    """Print ``text`` to stdout, flushed. Once stdout is a pipe whose reader has gone (``| head -3`` has its
    lines), the fit goes on and later text goes to the null device: a lap's line raised BrokenPipeError
    and stopped the fit at the next lap ("pyro-memo: error: [Errno 32] Broken pipe", exit 2), its
    files and JSON unwritten."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit finds a working stdout too
        finally:
            os.close(devnull)


def report(text, out, json_path):
    """Write a fit's results ``out`` to ``json_path`` (if given), then print its summary ``text``: the
    results are kept when stdout is gone (a closed pipe), and printed when the JSON cannot be written."""
    try:
        if json_path:
            from ..reporting import write_json

            write_json(json_path, out)
    finally:
        say(text)
    return 0


def laps_text(out, digits=1):
    """``"6 laps in 1.2 s"`` for a fit's summary; after a resume ``"6 laps (3 before --resume, 3 in 1.2 s)"``."""
    laps, before, seconds = out["laps"], out.get("resumed_laps", 0), out["seconds"]
    if not before:
        return f"{laps} laps in {seconds:.{digits}f} s"
    return f"{laps} laps ({before} before --resume, {laps - before} in {seconds:.{digits}f} s)"


def compare_progress(args):
    """The ``progress`` callback of a comparison: messages to stderr unless ``--quiet``; after a run, a
    stop request (:func:`stop_requested`) ends the comparison."""

    def progress(message):
        if not args.quiet:
            print(message, file=sys.stderr)
        return stop_requested(args)

    return progress


def print_comparison(rows, columns, out):
    """Print the per-method summary table and where the files went."""
    from ..comparison import markdown_tables

    print(markdown_tables(rows, columns)[1], end="")
    print(f"tables, traces and plots written to {out}/")
