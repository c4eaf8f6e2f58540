"""The ``pyro-memo`` console script: ``fit`` and ``compare`` for every registered model,
``predict`` with a model ``fit --save`` wrote (:mod:`pyro_memo.cli.predict`), and ``patches`` and
``denoise`` for image denoising with a patch prior (:mod:`pyro_memo.cli.denoise`).

The models and their options come from :mod:`pyro_memo.cli.registry`; see there how a model
registers itself.
"""

import argparse
import os
import sys

from ..checks import interrupt_behind
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
    parser.command_parsers = sub.choices  # command -> its parser (parse_command_line)
    return parser


def parse_command_line(parser, argv=None):
    """``argv`` (default ``sys.argv[1:]``) parsed by :func:`build_parser`'s ``parser``, the command's options
    and positionals in any order: ``pyro-memo patches out.npy --n 10 camera`` reads ``camera`` as an image
    (argparse's ``parse_args`` had closed the ``IMAGE ...`` list at ``--n`` and refused it as an unrecognized
    argument). argparse's ``parse_intermixed_args`` cannot parse a parser with sub-commands, so it parses
    the command's own parser; no command, an unknown one or ``--help`` go to ``parser``, as before, and so
    does a command line with ``--`` (Python 3.11's intermixed parsing drops it and reads a following
    ``-name`` as an option)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    commands = getattr(parser, "command_parsers", {})
    if not argv or argv[0] not in commands or "--" in argv:
        return parser.parse_args(argv)
    args = commands[argv[0]].parse_intermixed_args(argv[1:])
    args.command = argv[0]
    return args


#: commands that are not per model: command -> its runner
DIRECT = {"predict": run_predict, "patches": run_patches, "denoise": run_denoise}


def main(argv=None):
    """Run ``pyro-memo``; returns the exit status (2 and one error line for bad options or data; 130 or
    143 after SIGINT or SIGTERM, see :mod:`pyro_memo.cli.interrupt`).

    Without ``argv`` (the ``pyro-memo`` program itself, which ends when this returns), the command leaves
    SIGINT and SIGTERM ignored, so that signals sent while Python shuts down change nothing (no
    traceback, the status stays); called with ``argv`` (from another program), it puts the caller's
    handlers back.
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:  # before the command's handlers were in place (imports, option parsing)
        print("pyro-memo: interrupted", file=sys.stderr)
        return 130


def _main(argv):
    args = parse_command_line(build_parser(), argv)
    with StopOnSignal(ignore_on_exit=argv is None) as stop:
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
        except KeyboardInterrupt:
            stop.close()
            return _interrupted(args, stop)
        except (ValueError, FloatingPointError, OSError) as err:
            stop.close()
            if interrupt_behind(err) is not None:  # a writer's clean-up failed over the interrupt
                return _interrupted(args, stop)
            remove_created(getattr(args, "created_folders", None))
            print(f"pyro-memo: error: {err}", file=sys.stderr)
            return 2
        except (MemoryError, RuntimeError) as err:
            stop.close()
            if not isinstance(err, MemoryError) and not _out_of_memory(err):
                raise
            remove_created(getattr(args, "created_folders", None))
            hint = getattr(args, "memory_hint", None) or "lower --K or use less data"  # a model's better cause
            print(f"pyro-memo: error: out of memory ({hint}): {_first_line(err)}", file=sys.stderr)
            return 2
        stop.close()
        if stop.requested:
            unit = "run" if args.command == "compare" else "epoch" if _algo(args) == "memory-bounded" else "lap"
            print(f"pyro-memo: stopped by {stop.name()} after a complete {unit}; the results above cover the "
                  f"{unit}s done{_resume_hint(args)}", file=sys.stderr)
            return stop.exit_status
    return status


def _interrupted(args, stop):
    """Stopped at once (a second signal): one line, and the exit status of the signal (130 when the
    interrupt came otherwise). An output folder the command created and left empty is removed."""
    remove_created(getattr(args, "created_folders", None))
    print(f"pyro-memo: interrupted{_resume_hint(args)}", file=sys.stderr)
    return stop.exit_status or 130


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
    """How to go on after an interrupted fit: only memoized VB writes a checkpoint (``--save DIR``), and
    only from the end of its first lap; ``--resume DIR`` without ``--save`` writes none (DIR keeps the
    checkpoint it resumed from)."""
    if args.command != "fit":
        return ""
    if _algo(args) != "memo":
        return f" (--algo {args.algo} writes no checkpoint: nothing to resume from)"
    save, resume = getattr(args, "save", None), getattr(args, "resume", None)
    if not (save or resume):
        return " (no --save: nothing to resume from)"
    if not save:  # the checkpoint resumed from is the one there was before this run
        return (f"; this run wrote no checkpoint (no --save), so its laps are not kept: {resume}/state.pt holds the "
                f"fit as it was before it; give --resume {resume} --save {resume} to keep a resumed fit's laps")
    for folder in (save, resume):
        if folder and os.path.isfile(os.path.join(folder, "state.pt")):
            return (f"; the last complete checkpoint is {folder}/state.pt: run the same command with --resume "
                    f"{folder} to go on")
    return f" before the first checkpoint: {save or resume} holds none yet, nothing to resume from"


if __name__ == "__main__":
    sys.exit(main())
