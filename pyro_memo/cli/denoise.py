"""``pyro-memo patches OUT.npy`` and ``pyro-memo denoise IMAGE``: training patches for a patch prior, and
image denoising with a Gaussian-mixture patch prior learnt by memoized VB (:mod:`pyro_memo.denoising`;
Hughes & Sudderth 2013, §4.4; Zoran & Weiss 2011).

A typical run::

    pyro-memo patches patches.npy --n 2000000 --exclude camera
    pyro-memo fit patches.npy --family zm-gauss --algo memo --K 1 --moves birth,merge,delete --batches 100 \\
        --save prior
    pyro-memo denoise camera --model prior --sigma 25 --method epll --out camera-epll.png

Options and paths are checked before torch (and scikit-image) are imported.
"""

import math
import os
import time

from ..checks import MAX_SEED
from .common import (
    _check_json_is_not_a_fit_file,
    check_not_an_input,
    check_output_file,
    check_output_folder,
    check_positive,
    parse_moves,
    report,
    stop_requested,
)
from .names import DP_MOVE_NAMES, EPLL_Z_STEPS, PATCH_SIDE, PHOTOGRAPH_NAMES, SIGMA_RANGE, SIGMA_RANGE_WHY

#: the noise level of Hughes & Sudderth 2013, §4.4 and Zoran & Weiss 2011, §4
DEFAULT_SIGMA = 25.0
#: training a prior inside ``denoise`` (no --model): defaults of the options that only training uses
TRAIN_DEFAULTS = {"patches": None, "n": 100_000, "K": 1, "laps": 10, "batches": 10,
                  "moves": "birth,merge,delete", "birth_targets": 4, "init_items": 10_000, "save": None}
METHODS = ("mmse", "epll")


def add_patches_command(sub):
    """Add the ``patches`` parser to the ``sub`` parsers."""
    names = ", ".join(PHOTOGRAPH_NAMES)
    parser = sub.add_parser(
        "patches", help="write random zero-mean image patches to a .npy file (training data of a patch prior)",
        description="Draw N random S x S patches (S = --size, default 8; positions uniform over all pixels of the "
                    "images), remove each patch's mean (its DC component) and write them to OUT.npy as an (N, S^2) "
                    "float64 array ((N, 64) for 8 x 8), chunk by chunk, never holding them all in memory; "
                    "'pyro-memo fit OUT.npy --family zm-gauss --algo memo' then reads them batch by batch. Images are "
                    "grayscale on the [0, 255] scale.")
    parser.add_argument("out", metavar="OUT.npy", help="the .npy file to write.")
    parser.add_argument("images", metavar="IMAGE", nargs="*",
                        help=f"image files or bundled photographs (scikit-image): {names}. Default: all the "
                             "bundled photographs.")
    parser.add_argument("--n", type=int, default=2_000_000, help="number of patches. Default: 2000000.")
    parser.add_argument("--exclude", default="", metavar="LIST",
                        help="comma-separated bundled photographs to leave out (e.g. camera, the test image).")
    parser.add_argument("--size", type=int, default=8, help="patch side in pixels. Default: 8.")
    parser.add_argument("--seed", type=int, default=0, help="seed of the patch positions. Default: 0.")
    return parser


def add_denoise_command(sub):
    """Add the ``denoise`` parser to the ``sub`` parsers."""
    parser = sub.add_parser(
        "denoise", help="denoise an image with a Gaussian-mixture patch prior (MMSE or EPLL)",
        description="Add white Gaussian noise of standard deviation --sigma (on the [0, 255] scale; seed --seed) to "
                    "the grayscale IMAGE, denoise it under a zero-mean Gaussian-mixture prior of its patches and "
                    "print the PSNR of the noisy and the denoised image. The prior is a DP mixture of zero-mean "
                    "Gaussians: --model, one saved by 'pyro-memo fit PATCHES.npy --family zm-gauss --save DIR', or "
                    "else one trained here by memoized VB from --K components with --moves on --patches (a .npy "
                    "file from 'pyro-memo patches') or on --n patches drawn from the bundled photographs other "
                    "than IMAGE. --method mmse: each overlapping patch's posterior mean, averaged per pixel; epll: "
                    "expected patch log likelihood by half-quadratic splitting (Zoran & Weiss 2011).")
    parser.add_argument("image", metavar="IMAGE",
                        help=f"an image file or a bundled photograph ({', '.join(PHOTOGRAPH_NAMES)}).")
    parser.add_argument("--model", metavar="MODEL", help="a model file (model.pt) or a folder holding one, "
                                                         "fitted with --family zm-gauss to zero-mean patches.")
    parser.add_argument("--sigma", type=float, default=DEFAULT_SIGMA,
                        help=f"noise standard deviation (pixel values 0-255), from {SIGMA_RANGE[0]:g} to "
                             f"{SIGMA_RANGE[1]:g}. Default: {DEFAULT_SIGMA:g}.")
    parser.add_argument("--method", choices=METHODS, default="mmse",
                        help="denoiser. Default: mmse. epll takes about three times as long and pays off on smooth "
                             "images and at high noise.")
    parser.add_argument("--z-step", choices=EPLL_Z_STEPS, help="with --method epll: restore each patch by its most "
                        "probable component (map, Zoran & Weiss's) or by its posterior mean (mmse). Default: map.")
    parser.add_argument("--seed", type=int, default=0, help="seed of the noise (and of training). Default: 0.")
    parser.add_argument("--crop", type=int, metavar="SIZE", help="denoise the central SIZE x SIZE square only.")
    parser.add_argument("--out", metavar="FILE.png", help="write the denoised image (clipped to 0-255) as a PNG.")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH (keys: psnr_noisy, "
                                                       "psnr_denoised, K, weights, seconds, ...).")
    parser.add_argument("--device", default="cpu", metavar="DEV", help="torch device: cpu, cuda, ... Default: cpu.")
    train = parser.add_argument_group("training (without --model)")
    train.add_argument("--patches", metavar="FILE.npy", help="training patches, read batch by batch.")
    train.add_argument("--n", type=int, help=f"training patches to draw when no --patches. Default: "
                                             f"{TRAIN_DEFAULTS['n']}.")
    train.add_argument("--K", type=int, help=f"initial components. Default: {TRAIN_DEFAULTS['K']}.")
    train.add_argument("--laps", type=int, help=f"laps of memoized VB. Default: {TRAIN_DEFAULTS['laps']}.")
    train.add_argument("--batches", type=int, help=f"batches. Default: {TRAIN_DEFAULTS['batches']}.")
    train.add_argument("--moves", metavar="LIST", help="moves ('' for a fixed K). Default: "
                                                       f"{TRAIN_DEFAULTS['moves']}.")
    train.add_argument("--birth-targets", type=int, metavar="T", help="with birth in --moves: components a birth "
                       "targets per lap, each with its own subsample and fresh mixture, kept only if the exact ELBO "
                       f"rises. Default: {TRAIN_DEFAULTS['birth_targets']}.")
    train.add_argument("--init-items", type=int, metavar="N", help="k-means++ starts a K > 1 fit from at most N "
                       f"patches (all of them when there are fewer). Default: {TRAIN_DEFAULTS['init_items']}.")
    train.add_argument("--save", metavar="DIR", help="write the trained model to DIR/model.pt.")
    return parser


def _check_image_name(name):
    if name not in PHOTOGRAPH_NAMES and not os.path.isfile(name):
        raise ValueError(f"{name}: no such image file (nor a bundled photograph: {', '.join(PHOTOGRAPH_NAMES)})")


def _check_common(args):
    if args.seed < 0:
        raise ValueError(f"--seed must be a nonnegative integer; got {args.seed}")
    if args.seed > MAX_SEED:
        raise ValueError(f"--seed must be at most {MAX_SEED} (2**63 - 1); got {args.seed}")


def check_patches(args):
    """Check ``patches`` options and paths before anything heavy is imported."""
    _check_common(args)
    if args.n < 1 or args.size < 2:
        raise ValueError(f"--n must be positive and --size at least 2; got {args.n} and {args.size}")
    if not args.out.endswith(".npy"):
        raise ValueError(f"OUT {args.out}: the patches are written as a .npy file; give a name ending in .npy")
    check_output_file(args.out, "OUT")
    exclude = {name.strip() for name in args.exclude.split(",") if name.strip()}
    unknown = sorted(exclude - set(PHOTOGRAPH_NAMES))
    if unknown:
        raise ValueError(f"--exclude {','.join(unknown)}: not a bundled photograph ({', '.join(PHOTOGRAPH_NAMES)})")
    args.images = args.images or [name for name in PHOTOGRAPH_NAMES if name not in exclude]
    args.images = [name for name in args.images if name not in exclude]
    if not args.images:
        raise ValueError("no images left to draw patches from (--exclude removed them all)")
    for name in args.images:
        _check_image_name(name)


def check_denoise(args):
    """Check ``denoise`` options and paths before anything heavy is imported; fills training defaults."""
    from ..checks import check_device
    from .models.dp import _check_batches
    from .predict import model_path

    _check_common(args)
    if not (math.isfinite(args.sigma) and args.sigma > 0):
        raise ValueError(f"--sigma must be a positive number; got {args.sigma}")
    if not SIGMA_RANGE[0] <= args.sigma <= SIGMA_RANGE[1]:
        raise ValueError(f"--sigma must lie in [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}] ({SIGMA_RANGE_WHY}); "
                         f"got {args.sigma:g}")
    _check_image_name(args.image)
    if args.z_step is not None and args.method != "epll":
        raise ValueError(f"--z-step {args.z_step}: EPLL's z-step, used only with --method epll")
    args.patch_side = None  # known before training: --patches' side, or the photographs' 8 x 8
    if args.model is not None:
        given = [f"--{k.replace('_', '-')}" for k in TRAIN_DEFAULTS if getattr(args, k) is not None]
        if given:
            raise ValueError(f"{', '.join(given)}: training options, not used with --model")
        args.model_file = model_path(args.model, "--model", "denoise")
    else:
        if args.patches is not None and args.n is not None:
            raise ValueError(f"--n {args.n}: draws training patches from the photographs; with --patches "
                             f"{args.patches} the fit takes that file's patches (leave --n out)")
        targets_given = args.birth_targets is not None
        for key, value in TRAIN_DEFAULTS.items():
            setattr(args, key, value if getattr(args, key) is None else getattr(args, key))
        check_positive(args, integers=("n", "K", "laps", "batches", "birth_targets", "init_items"))
        parse_moves(args.moves, DP_MOVE_NAMES, "dp")  # the patch prior is a DP mixture
        if "birth" not in [name.strip() for name in args.moves.split(",")]:
            if targets_given:
                raise ValueError("--birth-targets sets the birth move; add birth to --moves (e.g. --moves "
                                 "birth,merge,delete)")
            args.birth_targets = None
        count, args.patch_side = _check_patch_file(args.patches) if args.patches is not None else (args.n, PATCH_SIDE)
        _check_batches(args.batches, count, "training patches")  # before the photographs are read
        if args.save:
            args.created_folders = []
            check_output_folder(args.save, "--save", args.created_folders)
    least = args.patch_side or 2  # with --model, its patches' side is checked once it is read
    if args.crop is not None and args.crop < least:
        raise ValueError(f"--crop must be at least {least} (pixels, the side of a patch); got {args.crop}")
    if args.out is not None:
        if not args.out.lower().endswith(".png"):
            raise ValueError(f"--out {args.out}: the denoised image is written as a PNG; give a name ending in .png")
        check_output_file(args.out, "--out")
        if os.path.exists(args.image) and os.path.realpath(args.out) == os.path.realpath(args.image):
            raise ValueError(f"--out {args.out}: names the input IMAGE; choose another path")
    if args.json:
        check_output_file(args.json, "--json")
        check_not_an_input(args.json, "--json", [("IMAGE", args.image), ("--patches", args.patches),
                                                 ("--model", getattr(args, "model_file", None))])
        _check_json_is_not_a_fit_file(args)  # --save DIR/model.pt, written before the JSON
        if args.out is not None and os.path.realpath(args.json) == os.path.realpath(args.out):
            raise ValueError(f"--json {args.json}: names the --out file, where the denoised image goes; "
                             "choose another path")
    check_device(args.device, "--device")


def _check_patch_file(path):
    """``--patches``: a ``.npy`` file of an ``(N, D)`` array of square patches (``D = size**2``), checked
    from its header before anything is read or trained; returns ``(number of patches, their side)``."""
    import numpy as np

    if not (path.endswith(".npy") and os.path.isfile(path)):
        raise ValueError(f"--patches {path}: no such .npy file (write one with pyro-memo patches)")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)  # the header; nothing read yet
    except (ValueError, OSError) as err:
        raise ValueError(f"--patches {path}: not a .npy array file ({err})") from None
    shape, dtype = array.shape, array.dtype
    del array
    side = math.isqrt(shape[1]) if len(shape) == 2 else 0
    if len(shape) != 2 or side < 2 or side * side != shape[1] or not np.issubdtype(dtype, np.number):
        raise ValueError(f"--patches {path}: expected an (N, D) numeric array of square patches, D = 64 for 8 x 8 "
                         f"(write one with pyro-memo patches); got shape {shape}, dtype {dtype}")
    return shape[0], side


def _load_images(names):
    from ..denoising import load_image

    return [load_image(name) for name in names]


def run_patches(args):
    """Run ``pyro-memo patches``; returns the exit status (errors raise :class:`ValueError`)."""
    check_patches(args)
    from ..denoising import write_patches

    start = time.perf_counter()
    images = _load_images(args.images)
    write_patches(args.out, images, args.n, size=args.size, seed=args.seed)
    size_gb = os.path.getsize(args.out) / 1e9
    print(f"{args.n} zero-mean {args.size} x {args.size} patches of {len(images)} images ({', '.join(args.images)}) "
          f"written to {args.out} ({size_gb:.2f} GB, {time.perf_counter() - start:.1f} s)")
    return 0


def _prior_from_model(args):
    """The patch prior of the saved model ``--model``."""
    from ..denoising import GaussianMixturePrior
    from ..model_file import load_model

    model = load_model(args.model_file, device=args.device)
    if model.kind != "dp-mixture":
        raise ValueError(f"--model {args.model}: a {model.kind} model; denoising needs a DP mixture fitted with "
                         "--family zm-gauss to image patches")
    return GaussianMixturePrior.from_posterior(model), {"model": args.model_file}


def _train_prior(args):
    """A patch prior trained by memoized VB on --patches or on --n patches of the other photographs."""
    from ..denoising import GaussianMixturePrior, fit_patch_mixture, sample_patches
    from ..model_file import save_model

    if args.patches is not None:
        data, source = args.patches, args.patches
    else:
        names = [name for name in PHOTOGRAPH_NAMES if name != args.image]
        data = sample_patches(_load_images(names), args.n, seed=args.seed)
        source = f"{args.n} patches of {len(names)} bundled photographs"
    start = time.perf_counter()
    births = {"move_options": {"birth": {"targets": args.birth_targets}}} if args.birth_targets else {}
    try:
        result = fit_patch_mixture(data, K=args.K, laps=args.laps, batches=args.batches, moves=args.moves,
                                   seed=args.seed, device=args.device, init_items=args.init_items,
                                   callback=lambda lap, elbo, posterior: stop_requested(args), **births)
    except ValueError as err:
        raise ValueError(f"--patches {source}: {err}" if args.patches else str(err)) from None
    info = {"trained_on": source, "fit_seconds": time.perf_counter() - start, "laps": len(result.elbo_trace),
            "birth_targets": args.birth_targets}
    if args.save:
        save_model(os.path.join(args.save, "model.pt"), result)
        info["saved"] = os.path.join(args.save, "model.pt")
    return GaussianMixturePrior.from_posterior(result.posterior), info


def _write_png(path, image):
    import numpy as np
    from PIL import Image

    from ..data.files import write_atomically

    pixels = np.clip(np.round(image), 0, 255).astype(np.uint8)
    write_atomically(path, lambda tmp: Image.fromarray(pixels).save(tmp, format="PNG"))


def _check_holds_a_patch(args, shape, size):
    """Raise :class:`ValueError` naming IMAGE (and ``--crop``) unless the image of ``shape`` holds one ``size`` x
    ``size`` patch."""
    if min(shape) < size:
        crop = f" after --crop {args.crop}" if args.crop is not None else ""
        raise ValueError(f"{args.image}: the image ({shape[0]} x {shape[1]}{crop}) is smaller than a {size} x {size} "
                         "patch")


def run_denoise(args):
    """Run ``pyro-memo denoise``; returns the exit status (errors raise :class:`ValueError`)."""
    check_denoise(args)
    from ..denoising import add_noise, center_crop, epll_denoise, load_image, mmse_denoise, psnr

    clean = load_image(args.image)
    if args.crop is not None:
        clean = center_crop(clean, args.crop)
    if args.patch_side is not None:  # before training, not after
        _check_holds_a_patch(args, clean.shape, args.patch_side)
    prior, info = _prior_from_model(args) if args.model is not None else _train_prior(args)
    size = math.isqrt(prior.dim)
    if size * size != prior.dim:
        raise ValueError(f"the model's components have dimension {prior.dim}, not a square patch")
    _check_holds_a_patch(args, clean.shape, size)
    noisy = add_noise(clean, args.sigma, seed=args.seed)
    start = time.perf_counter()
    if args.method == "mmse":
        estimate = mmse_denoise(noisy, prior, args.sigma, size=size)
    else:
        estimate = epll_denoise(noisy, prior, args.sigma, size=size, z_step=args.z_step or "map")
    out = {"image": args.image, "shape": list(clean.shape), "sigma": args.sigma, "method": args.method,
           **({"z_step": args.z_step or "map"} if args.method == "epll" else {}),
           "seed": args.seed, "psnr_noisy": psnr(clean, noisy), "psnr_denoised": psnr(clean, estimate),
           "K": prior.K, "weights": prior.weights.cpu().tolist(), "patch": size,
           "seconds": time.perf_counter() - start, **info}
    if args.out:
        _write_png(args.out, estimate)
        out["out"] = args.out
    text = (f"{args.image} ({clean.shape[0]} x {clean.shape[1]}), sigma {args.sigma:g}: noisy PSNR "
            f"{out['psnr_noisy']:.2f} dB, {args.method} PSNR {out['psnr_denoised']:.2f} dB with {prior.K} "
            f"components ({out['seconds']:.1f} s)" + (f"; written to {args.out}" if args.out else ""))
    return report(text, out, args.json)
