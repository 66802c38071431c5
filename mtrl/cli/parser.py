"""The ``mtrl`` command's argument parser: its subcommands, their flags and help texts (each
subcommand's description is its function's docstring); the commands themselves are in
:mod:`mtrl.cli.info`, :mod:`mtrl.cli.validate`, :mod:`mtrl.cli.train` and
:mod:`mtrl.cli.evaluate`."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from mtrl import __version__
from mtrl.cli.evaluate import cmd_eval, cmd_report
from mtrl.cli.info import cmd_envs, cmd_plugins, cmd_schema
from mtrl.cli.train import cmd_train
from mtrl.cli.tune import cmd_tune
from mtrl.cli.validate import cmd_validate


def _count(least: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``least`` (argparse then exits 2 with the
    flag's name and a usage line, never a traceback from the config models)."""

    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is below {least}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The ``mtrl`` parser; each subcommand's ``func`` default is the function that runs it."""
    parser = argparse.ArgumentParser(
        prog="mtrl", description="Train one agent on many heterogeneous RL tasks at once."
    )
    parser.add_argument("--version", action="version", version=f"mtrl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "plugins",
        help="list plugins, their hooks, envs and load errors",
        description=cmd_plugins.__doc__,
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser(
        "envs", help="list env ids with observation and action spaces", description=cmd_envs.__doc__
    )
    p.add_argument("--plugin", help="only envs of this plugin")
    p.add_argument("--match", help="only ids containing this text (case-insensitive)")
    p.add_argument("--ids-only", action="store_true", help="ids only (fast: builds no env)")
    p.add_argument(
        "-l",
        "--long",
        action="store_true",
        help="also each env's description, random/reference scores, time limit and notes",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser(
        "validate", help="validate experiment configs", description=cmd_validate.__doc__
    )
    p.add_argument("configs", nargs="+", metavar="CONFIG", help="YAML config file(s)")
    p.add_argument(
        "--check-envs",
        action="store_true",
        help="also build one copy of each task's env with its env_kwargs",
    )
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "train", help="train one agent on all tasks of a config", description=cmd_train.__doc__
    )
    p.add_argument("config", metavar="CONFIG", nargs="?", help="YAML experiment config")
    p.add_argument(
        "--resume", metavar="RUN_DIR", help="continue this run from its newest good checkpoint"
    )
    p.add_argument("--total-env-steps", type=_count(1), help="override total_env_steps")
    p.add_argument("--seed", type=_count(0), help="override the run seed")
    p.add_argument(
        "--nproc",
        type=int,
        metavar="N",
        help="N data-parallel learner replicas on this node, each with its own actors "
        "(runs this command under torchrun --standalone; docs/DISTRIBUTED.md)",
    )
    p.set_defaults(func=cmd_train)

    p = sub.add_parser(
        "tune",
        help="population-based training of a config's runs (its tune: section)",
        description=cmd_tune.__doc__,
    )
    p.add_argument("config", metavar="CONFIG", help="YAML experiment config with a tune: section")
    p.add_argument("--population", type=_count(2), help="override tune.population")
    p.add_argument("--total-env-steps", type=_count(1), help="override total_env_steps")
    p.add_argument("--dir", default="runs/tune", help="where populations go (runs/tune)")
    p.add_argument("--resume", action="store_true", help="continue the population in DIR/NAME")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser(
        "schema", help="print the JSON Schema of experiment configs", description=cmd_schema.__doc__
    )
    p.add_argument("--output", "-o", help="write to this file instead of stdout")
    p.set_defaults(func=cmd_schema)
    p = sub.add_parser(
        "report",
        help="plot learning curves and run statistics of run directories",
        description=cmd_report.__doc__,
    )
    p.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="run directories, or a population's directory (mtrl tune: DIR/NAME)",
    )
    p.add_argument(
        "--output",
        "-o",
        help="directory for the PNGs (default: RUN_DIR/plots for one run, ./report for several)",
    )
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "eval", help="evaluate a checkpointed agent on its tasks", description=cmd_eval.__doc__
    )
    p.add_argument(
        "target",
        metavar="RUN_DIR|CHECKPOINT",
        help="a run directory (its newest good checkpoint) or a checkpoint file",
    )
    p.add_argument("--tasks", nargs="+", metavar="NAME", help="only these tasks (name or env id)")
    p.add_argument("--episodes", type=int, default=10, help="episodes per task and mode (10)")
    modes = p.add_mutually_exclusive_group()
    for mode, text in (
        ("greedy", "most likely actions only"),
        ("stochastic", "sampled actions only"),
        ("both", "greedy and stochastic (default)"),
    ):
        modes.add_argument(f"--{mode}", dest="mode", action="store_const", const=mode, help=text)
    p.set_defaults(mode="both")
    p.add_argument("--seed", type=_count(0), help="eval env seed (default: training seed + 1e6)")
    p.add_argument("--device", default="cpu", help="torch device for the policy (cpu)")
    p.add_argument(
        "--workers",
        type=_count(1),
        default=1,
        help="evaluate the tasks in this many processes at once (1); same results",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_eval)
    return parser
