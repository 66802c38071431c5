"""The ``mtrl`` command line: wiring only; each subcommand calls the package's public API.
The tables it prints are in :mod:`mtrl.cli_tables`.

User mistakes (bad config, unknown id, bad plugin) print one line per problem and exit 2;
never a traceback. Unexpected internal errors keep their traceback (they are bugs).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mtrl import __version__
from mtrl.errors import UserError

EXIT_USER_ERROR = 2


def cmd_plugins(args: argparse.Namespace) -> int:
    """List plugins: name, status, version, package, hooks, envs, learning rules, scheduling
    policies and trackers offered, errors."""
    from mtrl.plugins import get_plugins

    infos = get_plugins().infos.values()
    if args.json:
        print(json.dumps([vars(i) for i in infos], indent=2))
        return 0
    from mtrl.cli_tables import print_plugins

    print_plugins(infos)
    return 0


def cmd_envs(args: argparse.Namespace) -> int:
    """List env ids with their single-copy observation and action spaces; ``--long`` adds each
    env's description, random/reference scores, time limit and library notes."""
    from mtrl.plugins import get_plugins
    from mtrl.plugins.describe import describe_env

    plugins = get_plugins()
    if args.plugin and args.plugin not in plugins.infos:
        raise UserError(
            f"--plugin: no plugin named {args.plugin!r}; installed: {', '.join(plugins.infos)}"
        )
    if args.plugin and not plugins.envs.ids(args.plugin) and plugins.failure_note(args.plugin):
        raise UserError(f"--plugin: {plugins.failure_note(args.plugin)}")
    specs = [s for s in plugins.envs if not args.plugin or s.plugin == args.plugin]
    if args.match:
        specs = [s for s in specs if args.match.lower() in s.id.lower()]
    if args.ids_only:
        rows = [{"id": s.id, "plugin": s.plugin} for s in specs]
    else:  # an env that cannot build gets an "error", its warnings become "notes"
        rows = [describe_env(s, long=args.long) for s in specs]
    if args.json:
        print(json.dumps(rows, indent=2))
    elif args.ids_only:
        print("\n".join(r["id"] for r in rows))
    elif args.long:
        from mtrl.cli_env_table import print_env_details

        print_env_details(rows)
    else:
        from mtrl.cli_tables import print_envs

        print_envs(rows)
        noted = sum("notes" in r for r in rows)
        print(
            "--long adds each env's description, random/reference scores and time limit"
            + (f", and the notes of {noted} env(s)" if noted else "")
        )
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate configs; one line per problem with file, line and YAML path."""
    from mtrl.actors.ray_cluster import placement_notes, ray_mode_problems
    from mtrl.config import load_config
    from mtrl.plugins import get_plugins
    from mtrl.preflight import check_memory
    from mtrl.scheduler.budget_check import weight_notes

    plugins = get_plugins()
    ids = plugins.envs.ids()
    failed = False
    for path in args.configs:
        try:
            cfg = load_config(
                path,
                env_ids=ids,
                scheduler_policies=plugins.schedulers.names(),
                tracker_names=plugins.trackers.names(),
                algorithms=plugins.algorithms.parallel_support(),
                env_note=plugins.unknown_env_note,
            )
            _check_commands(cfg, plugins, path)
            if args.check_envs:
                _check_envs(cfg, plugins, path)
            specs = [plugins.env_spec(t.env) for t in cfg.tasks] if args.check_envs else None
            check_memory(cfg, specs, source=path)  # the envs' spaces only with --check-envs
            if problems := ray_mode_problems(cfg, path, cluster=args.check_envs):
                raise UserError("\n".join(problems), problems=problems)
        except UserError as e:
            failed = True
            for line in e.problems:
                print(line, file=sys.stderr)
            continue
        tasks = ", ".join(t.key for t in cfg.tasks)
        print(f"{path}: ok ({len(cfg.tasks)} tasks: {tasks})")
        for note in weight_notes(cfg) + placement_notes(cfg):
            print(f"{path}: warning: {note}")
    return EXIT_USER_ERROR if failed else 0


def _check_commands(cfg: Any, plugins: Any, path: str) -> None:
    """Refuse tasks whose env runs a program that is missing or not executable (an external
    simulation's command), naming the task's line in the config."""
    from mtrl.config.lines import config_location
    from mtrl.task_envs import command_problems

    specs = [plugins.env_spec(t.env) for t in cfg.tasks]
    problems = [
        f"{config_location(path, ('tasks', i, 'env'))}: tasks[{i}].env: {text}"
        for i, text in command_problems(cfg, specs)
    ]
    if problems:
        raise UserError("\n".join(problems), problems=problems)


def _check_envs(cfg: Any, plugins: Any, path: str) -> None:
    """Build one copy of every task's env with its kwargs and check that the learner can train
    on its spaces (the encoders and heads ``train`` builds), so bad kwargs and unsupported
    spaces surface now; each problem names the task's line in the config."""
    from mtrl.config.lines import config_location
    from mtrl.learner.trainable import UnsupportedSpaceError, check_trainable

    problems = []
    for i, task in enumerate(cfg.tasks):
        try:
            env = plugins.envs.get(task.env).build(num_envs=1, seed=0, **task.env_kwargs)
        except Exception as e:
            msg = f"{type(e).__name__}: {e}".splitlines()[0]
            where = config_location(path, ("tasks", i, "env_kwargs"))
            problems.append(f"{where}: tasks[{i}].env_kwargs: cannot build {task.env}: {msg}")
            continue
        try:
            spaces = env.single_observation_space, env.single_action_space
            check_trainable(*spaces, cfg.learner.model)
        except UnsupportedSpaceError as e:
            where = config_location(path, ("tasks", i, "env"))
            problems.append(f"{where}: tasks[{i}].env: {task.env}: {e.path}: {e.reason}")
        finally:
            env.close()
    if problems:
        raise UserError("\n".join(problems), problems=problems)


def cmd_train(args: argparse.Namespace) -> int:
    """Train one agent on every task of CONFIG (or continue RUN_DIR with --resume); prints
    progress and a final per-task table. Ctrl-C or SIGTERM stops cleanly with a checkpoint."""
    from mtrl.actors.ray_cluster import placement_notes
    from mtrl.config import load_config
    from mtrl.plugins import get_plugins
    from mtrl.run_state import NothingToDo
    from mtrl.scheduler.budget_check import weight_notes
    from mtrl.trainer import Trainer

    if args.nproc is not None and "WORLD_SIZE" not in os.environ:
        return _relaunch_with_torchrun(args.nproc)
    plugins = get_plugins()
    if args.resume:
        if args.config or args.seed is not None:
            raise UserError("--resume RUN_DIR continues a run as configured: drop CONFIG/--seed")
        run_dir = Path(args.resume)
        if not run_dir.is_dir():
            raise UserError(f"{run_dir}: no such run directory")
        try:
            trainer = Trainer.resume(run_dir, plugins, total_env_steps=args.total_env_steps)
        except NothingToDo as e:
            print(e)
            return 0
    else:
        if not args.config:
            raise UserError("give a CONFIG to train, or --resume RUN_DIR")
        cfg = load_config(
            args.config,
            env_ids=plugins.envs.ids(),
            scheduler_policies=plugins.schedulers.names(),
            tracker_names=plugins.trackers.names(),
            algorithms=plugins.algorithms.parallel_support(),
            env_note=plugins.unknown_env_note,
        )
        overrides: dict[str, Any] = {}
        if args.total_env_steps is not None:
            overrides["total_env_steps"] = args.total_env_steps
        if args.seed is not None:
            overrides["seed"] = args.seed
        if overrides:
            cfg = cfg.model_validate({**cfg.model_dump(), **overrides})
        for note in weight_notes(cfg) + placement_notes(cfg):
            print(f"WARNING: {note}")
        trainer = Trainer(cfg, plugins)
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        if received:  # a second signal: stop now
            raise KeyboardInterrupt
        received.append(signum)
        print(f"\n{signal.Signals(signum).name}: stopping after this round (again to abort)")
        trainer.request_stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    ctx = trainer.ctx
    finished = False
    try:
        result = trainer.run()
        finished = True
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        trainer.close(keep_process_group=finished and ctx.distributed)
    code = 128 + received[0] if received else 0
    if ctx.is_main:  # replicas of a torchrun job: rank 0 reports for all
        from mtrl.cli_tables import print_train_results

        print_train_results(result)
        if received and result.run_dir is not None:
            print(f"checkpoint written; continue with: mtrl train --resume {result.run_dir}")
    if ctx.distributed:
        ctx.exit_process(code)
    return code


def _relaunch_with_torchrun(nproc: int) -> int:
    """``mtrl train --nproc N ...`` on one node: the same command under torchrun (N replicas)."""
    if nproc < 1:
        raise UserError(f"--nproc must be >= 1, got {nproc}")
    rest, skip = [], False
    for a in sys.argv[1:]:
        if not skip and a != "--nproc" and not a.startswith("--nproc="):
            rest.append(a)
        skip = a == "--nproc"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "-m",
        "mtrl.cli",
        *rest,
    ]
    print("launching:", " ".join(cmd[1:]), flush=True)
    return subprocess.call(cmd)


def cmd_schema(args: argparse.Namespace) -> int:
    """Print (or write) the JSON Schema of experiment configs."""
    from mtrl.config import config_schema

    text = json.dumps(config_schema(), indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
        print(f"wrote {args.output}")
    else:
        print(text)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Write PNG figures (learning curves, throughput, actors, policy lag, PopArt σ, losses,
    the learner's per-task diagnostics) from the metrics of one or several run directories,
    overlaid for comparison."""
    from mtrl.tracking.report import write_report

    written = write_report(
        args.run_dirs, args.output, note=lambda line: print(f"note: {line}", file=sys.stderr)
    )
    for path in written:
        print(path)
    if not written:
        print("no figures: the runs have no plottable metrics yet", file=sys.stderr)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate a trained agent: N episodes per task with greedy and/or stochastic actions;
    mean ± std return and normalised score per task, as a table or JSON."""
    import warnings

    from mtrl.evaluate import MODES, evaluate, load_for_eval

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ckpt = load_for_eval(args.target)  # a skipped corrupt checkpoint warns: say so plainly
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    modes = MODES if args.mode == "both" else (args.mode,)
    results = evaluate(
        ckpt,
        tasks=args.tasks,
        episodes=args.episodes,
        modes=modes,
        seed=args.seed,
        device=args.device,
    )
    if args.json:
        doc = {
            "checkpoint": str(ckpt.path),
            "env_steps": ckpt.env_steps,
            "episodes": args.episodes,
            "results": [r.to_json() for r in results],
        }
        print(json.dumps(doc, indent=2))
        return 0
    from mtrl.cli_tables import print_eval

    print_eval(ckpt, results)
    return 0


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
        "schema", help="print the JSON Schema of experiment configs", description=cmd_schema.__doc__
    )
    p.add_argument("--output", "-o", help="write to this file instead of stdout")
    p.set_defaults(func=cmd_schema)
    p = sub.add_parser(
        "report",
        help="plot learning curves and run statistics of run directories",
        description=cmd_report.__doc__,
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories")
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
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_eval)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as e:
        for line in e.problems:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
