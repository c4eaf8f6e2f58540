"""The ``pyro-memo`` console script: ``fit`` and ``compare`` for every registered model,
``predict`` with a model ``fit --save`` wrote (:mod:`pyro_memo.cli.predict`), and ``patches`` and
``denoise`` for image denoising with a patch prior (:mod:`pyro_memo.cli.denoise`).

The models and their options come from :mod:`pyro_memo.cli.registry`; see there how a model
registers itself.
"""

import argparse
import sys

from . import common  # noqa: F401  (registers the shared options)
from .common import add_threads_option, check_numbers, check_outputs, remove_created, thread_limit
from .denoise import add_denoise_command, add_patches_command, run_denoise, run_patches
from .interrupt import StopOnSignal
from .predict import add_predict_command, run_predict
from .registry import (
    COMMANDS,
    MODELS,
    CliModel,
    Option,
    Use,
    add_command,
    load_models,
    register_model,
    register_option,
    resolve,
)

__all__ = ["CliModel", "Option", "Use", "build_parser", "main", "register_model", "register_option"]


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``pyro-memo: error: ...``) and exit status 2."""

    def error(self, message):
        print(f"pyro-memo: error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def build_parser():
    """The ``pyro-memo`` parser with a sub-command per command and every registered model."""
    load_models()
    parser = Parser(prog="pyro-memo", description="Memoized variational inference for Bayesian nonparametric "
                                                  f"models (pyro-memo). Models: {', '.join(MODELS)}.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        add_threads_option(add_command(sub, command), [m.name for m in MODELS.values() if command in m.uses])
    for add in (add_predict_command, add_patches_command, add_denoise_command):
        add_threads_option(add(sub))
    return parser


#: commands that are not per model: command -> its runner
DIRECT = {"predict": run_predict, "patches": run_patches, "denoise": run_denoise}


def main(argv=None):
    """Run ``pyro-memo``; returns the exit status (2 and one error line for bad options or data)."""
    args = build_parser().parse_args(argv)
    with StopOnSignal() as stop:
        args.stop = stop
        try:
            with thread_limit(args.threads):
                if args.command in DIRECT:
                    status = DIRECT[args.command](args)
                else:
                    model = resolve(args.command, args)
                    check_numbers(args)
                    check_outputs(args)
                    status = getattr(model, args.command)(args)
        except (ValueError, FloatingPointError, OSError) as err:
            remove_created(getattr(args, "created_folders", None))
            print(f"pyro-memo: error: {err}", file=sys.stderr)
            return 2
        except (MemoryError, RuntimeError) as err:
            if not isinstance(err, MemoryError) and not _out_of_memory(err):
                raise
            remove_created(getattr(args, "created_folders", None))
            print(f"pyro-memo: error: out of memory (lower --K or use less data): "
                  f"{_first_line(err)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"pyro-memo: interrupted{_resume_hint(args)}", file=sys.stderr)
            return 130
    if stop.requested:
        unit = "run" if args.command == "compare" else "epoch" if _algo(args) == "memory-bounded" else "lap"
        print(f"pyro-memo: stopped by {stop.name()} after a complete {unit}; the results above cover the {unit}s "
              f"done{_resume_hint(args)}", file=sys.stderr)
        return stop.exit_status
    return status


def _out_of_memory(err):
    text = str(err).lower()
    return "can't allocate memory" in text or "out of memory" in text


def _first_line(err):
    line = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
    return line[:200]


def _algo(args):
    """The command's algorithm (memoized VB where it takes no ``--algo``)."""
    return getattr(args, "algo", None) or "memo"


def _resume_hint(args):
    """How to go on after an interrupted fit: only memoized VB writes a checkpoint (``--save DIR``)."""
    save = getattr(args, "save", None) or getattr(args, "resume", None)
    if args.command != "fit":
        return ""
    if _algo(args) != "memo":
        return f" (--algo {args.algo} writes no checkpoint: nothing to resume from)"
    if not save:
        return " (no --save: nothing to resume from)"
    return f"; the last complete checkpoint is {save}/state.pt: run the same command with --resume {save} to go on"


if __name__ == "__main__":
    sys.exit(main())
