"""The registry behind ``pyro-memo``: commands, options and the models they run.

Each model is a :class:`CliModel` registered with :func:`register_model`; it says which
options it takes for each command (a :class:`Use`: its meaning, default, choices and the
other options it needs) and validates them. Options are :class:`Option` objects shared by
the models that use them; a model adds its own with :func:`register_option`. The parser
offers every registered option; :func:`resolve` then refuses, with one error naming the
option and the model, an option the chosen model does not take, a choice it does not offer,
or an option given without the one it needs (e.g. ``--moves`` without ``--algo memo``).
Nothing is silently ignored or remapped.

Built-in models live in :mod:`pyro_memo.cli.models`, one module each, and register
themselves on import; every module there is imported when the parser is built, so a new
model (a new module, or a plugin that calls :func:`register_model` before
:func:`pyro_memo.cli.main`) needs no edit of the CLI.
"""

import importlib
import pkgutil
from dataclasses import dataclass, field

#: commands: name -> (one-line help, description)
COMMANDS = {
    "fit": ("fit a model to a dataset and print a summary",
            "Fit a model (--model: a DP mixture by default) to DATA and print a summary. Each option says in "
            "brackets which models take it; an option the chosen model does not take is an error."),
    "compare": ("run inference methods side by side and score them alike",
                "Run METHODS x SEEDS of one model on DATA under one budget and score every run alike (the DP "
                "mixture: exact ELBO, held-out log predictive density, NMI, Hungarian accuracy, effective K; the "
                "HDP: document completion held out, bound per token, topics > 1%). Writes runs.csv / runs.md "
                "(per run), summary.md (mean +- sd per method), traces.csv and plots to --out. Each option says "
                "in brackets which models take it."),
}

#: the default model of every command
DEFAULT_MODEL = "dp"


@dataclass(frozen=True)
class Option:
    """A command-line option: its ``flag`` (``"--K"``; a name without dashes is the
    positional argument), what it is for every model (``about``) and the argparse keywords
    all models share (``type``, ``metavar``, ``action``). Defaults, choices and per-model
    meaning are the models' (:class:`Use`)."""

    flag: str
    about: str
    kwargs: dict = field(default_factory=dict)

    @property
    def dest(self):
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Use:
    """What an option is for one model: ``help`` (its meaning there; may be empty),
    ``default``, the ``choices`` the model offers (``None``: any value of the option's type),
    ``needs``: ``(dest, allowed values)`` pairs the option, given explicitly, requires, and
    ``hints``: value -> a sentence added to the error when that value is refused."""

    help: str = ""
    default: object = None
    choices: tuple = None
    needs: tuple = ()
    hints: dict = field(default_factory=dict)


class CliModel:
    """A model the ``pyro-memo`` commands run.

    :cvar str name: the ``--model`` value; ``aliases`` are accepted as well.
    :cvar str summary: one line for ``--model``'s help.
    :cvar dict uses: command -> ``{dest: Use}``: the options the model takes per command
        (a command the model does not support is left out).
    :cvar dict why_not: dest -> why an option does not apply (added to the error).
    """

    name = ""
    aliases = ()
    summary = ""
    uses = {}
    why_not = {}

    def check(self, command, args):
        """Validate the resolved options of ``command`` (raise :class:`ValueError`)."""

    def fit(self, args):
        """Run ``pyro-memo fit``; returns the exit status."""
        raise NotImplementedError

    def compare(self, args):
        """Run ``pyro-memo compare``; returns the exit status."""
        raise NotImplementedError


#: command -> {dest: Option}, in help order
OPTIONS = {command: {} for command in COMMANDS}
#: model name -> CliModel
MODELS = {}


def register_option(command, option):
    """Add ``option`` to ``command`` (a second registration of the same flag must be equal)."""
    known = OPTIONS[command].get(option.dest)
    if known is not None and known != option:
        raise ValueError(f"pyro-memo {command}: option {option.flag} is already registered differently")
    OPTIONS[command][option.dest] = option


def register_model(model):
    """Add ``model`` (a :class:`CliModel` instance) to the ``--model`` choices."""
    names = {n for m in MODELS.values() for n in (m.name, *m.aliases)}
    clash = names & {model.name, *model.aliases}
    if clash:
        raise ValueError(f"--model {', '.join(sorted(clash))} is already registered")
    for command, uses in model.uses.items():
        unknown = set(uses) - set(OPTIONS[command])
        if unknown:
            raise ValueError(f"model {model.name} uses unregistered {command} options {sorted(unknown)}")
    MODELS[model.name] = model
    return model


def load_models():
    """Import every module of :mod:`pyro_memo.cli.models` (each registers its model) and put the
    built-in models in their modules' order, ahead of plugins, so the help and the ``--model``
    choices read the same whichever module happened to be imported first."""
    from . import models

    modules = [f"{models.__name__}.{info.name}" for info in pkgutil.iter_modules(models.__path__)]
    for module in modules:
        importlib.import_module(module)
    rank = {module: i for i, module in enumerate(modules)}
    ordered = sorted(MODELS.values(), key=lambda m: rank.get(type(m).__module__, len(modules)))
    MODELS.clear()
    MODELS.update((m.name, m) for m in ordered)


def get_model(name):
    """The registered model called ``name`` (or one of its aliases)."""
    for model in MODELS.values():
        if name == model.name or name in model.aliases:
            return model
    raise ValueError(f"--model {name}: unknown; choose from {', '.join(MODELS)}")


def _show(value):
    return ",".join(value) if isinstance(value, (tuple, list)) else str(value)


def _unset(value):
    return value is None or value is False or value == ""


def option_help(command, option):
    """``option``'s help: the models that take it, in brackets, what it is, and per model its
    meaning, choices (where the models' differ), default (where they differ) and what it needs."""
    uses = {m.name: m.uses[command][option.dest] for m in MODELS.values() if option.dest in m.uses.get(command, {})}
    same_default = len({repr(u.default) for u in uses.values()}) == 1
    same_choices = len({u.choices for u in uses.values()}) == 1
    parts = [f"[{', '.join(uses)}]", option.about]
    for name, use in uses.items():
        bits = [use.help.removesuffix(".")] if use.help else []  # one period: an ellipsis keeps its three
        if use.choices and not same_choices:
            bits.append("one of " + ", ".join(use.choices))
        if not same_default and not _unset(use.default):
            bits.append(f"default {_show(use.default)}")
        bits += [f"needs {OPTIONS[command][dest].flag} {' or '.join(allowed)}" for dest, allowed in use.needs]
        if bits:
            parts.append((f"{name}: " if len(uses) > 1 else "") + "; ".join(bits) + ".")
    default = next(iter(uses.values())).default
    if same_default and not _unset(default):
        parts.append(f"Default {_show(default)}.")
    return " ".join(parts).replace("%", "%%")


def add_command(sub, command):
    """Add ``command``'s parser to the ``sub`` parsers with ``--model`` and every option."""
    summary, description = COMMANDS[command]
    parser = sub.add_parser(command, help=summary, description=description)
    models = [m for m in MODELS.values() if command in m.uses]
    names = [n for m in models for n in (m.name, *m.aliases)]
    parser.add_argument("--model", choices=names, default=None,
                        help="the model: " + "; ".join(
                            f"{m.name}" + (f" (also {', '.join(m.aliases)})" if m.aliases else "") + f": {m.summary}"
                            for m in models) + f". Default {DEFAULT_MODEL}.")
    for dest, option in OPTIONS[command].items():
        uses = [m.uses[command][dest] for m in models if dest in m.uses[command]]
        if not uses:
            continue
        choices = list(dict.fromkeys(c for u in uses for c in (u.choices or ()))) or None
        kwargs = dict(option.kwargs, default=None, help=option_help(command, option))
        if choices and all(u.choices for u in uses):
            kwargs["choices"] = choices
        if option.flag.startswith("-"):
            parser.add_argument(option.flag, dest=dest, **kwargs)
        else:
            parser.add_argument(dest, **kwargs)
    return parser


def resolve(command, args):
    """Check ``args`` of ``command`` against the chosen model and fill in its defaults;
    returns the model. Raises :class:`ValueError` naming the option and the model."""
    model = get_model(args.model or DEFAULT_MODEL)
    if command not in model.uses:
        raise ValueError(f"pyro-memo {command} does not run --model {model.name}")
    uses, options = model.uses[command], OPTIONS[command]
    given = [dest for dest in options if getattr(args, dest, None) is not None]
    for dest in given:
        if dest not in uses:
            takers = [m.name for m in MODELS.values() if dest in m.uses.get(command, {})]
            why = model.why_not.get(dest)
            raise ValueError(f"{options[dest].flag} does not apply to --model {model.name}"
                             + (f": {why}" if why else "") + f" (it applies to --model {', '.join(takers)})")
        value, use = getattr(args, dest), uses[dest]
        if use.choices is not None and value not in use.choices:
            raise ValueError(f"{options[dest].flag} {value} is not available for --model {model.name}; choose from "
                             f"{', '.join(use.choices)}" + (f" ({use.hints[value]})" if value in use.hints else ""))
    for dest, use in uses.items():
        if getattr(args, dest, None) is None:
            setattr(args, dest, use.default)
    for dest in given:
        for other, allowed in uses[dest].needs:
            if getattr(args, other) not in allowed:
                raise ValueError(f"{options[dest].flag} needs {options[other].flag} {' or '.join(allowed)} "
                                 f"(--model {model.name})")
    args.model = model.name
    model.check(command, args)
    return model
