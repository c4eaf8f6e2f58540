"""The ``pyro-memo`` console script: ``fit`` and ``compare`` for every registered model.

The models and their options come from :mod:`pyro_memo.cli.registry`; see there how a model
registers itself.
"""

import argparse
import sys

from . import common  # noqa: F401  (registers the shared options)
from .interrupt import StopOnSignal
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


def build_parser():
    """The ``pyro-memo`` parser with a sub-command per command and every registered model."""
    load_models()
    parser = argparse.ArgumentParser(prog="pyro-memo",
                                     description="Memoized variational inference for Bayesian nonparametric models "
                                                 f"(pyro-memo). Models: {', '.join(MODELS)}.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        add_command(sub, command)
    return parser


def main(argv=None):
    """Run ``pyro-memo``; returns the exit status (2 and one error line for bad options or data)."""
    args = build_parser().parse_args(argv)
    with StopOnSignal() as stop:
        args.stop = stop
        try:
            model = resolve(args.command, args)
            status = getattr(model, args.command)(args)
        except (ValueError, FloatingPointError, OSError) as err:
            print(f"pyro-memo: error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"pyro-memo: interrupted{_resume_hint(args)}", file=sys.stderr)
            return 130
    if stop.requested:
        print(f"pyro-memo: stopped by {stop.name()} after a complete lap; the results above cover the laps done"
              f"{_resume_hint(args)}", file=sys.stderr)
        return stop.exit_status
    return status


def _resume_hint(args):
    """How to go on after an interrupted fit."""
    save = getattr(args, "save", None) or getattr(args, "resume", None)
    if args.command != "fit":
        return ""
    if not save:
        return " (no --save: nothing to resume from)"
    return f"; the last complete checkpoint is {save}/state.pt: run the same command with --resume {save} to go on"


if __name__ == "__main__":
    sys.exit(main())
