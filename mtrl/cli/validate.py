"""``mtrl validate``: check experiment configs without training, each problem one line
naming its file, line and YAML path; ``--check-envs`` also builds one copy of every task's env
and checks that the learner can train on its spaces."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from mtrl.cli.exit_codes import EXIT_USER_ERROR
from mtrl.errors import UserError


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate configs; one line per problem with file, line and YAML path."""
    from mtrl.plugins import get_plugins

    plugins = get_plugins()
    failed = False
    logs = _SimLogs() if args.check_envs else None
    try:
        failed = _validate_each(args, plugins, logs)
    finally:
        if logs is not None:
            logs.close()
    return EXIT_USER_ERROR if failed else 0


def _validate_each(args: argparse.Namespace, plugins: Any, logs: _SimLogs | None) -> bool:
    """Validate each config of ``args``, printing its result; True when any failed."""
    from mtrl.actors.ray_cluster import placement_notes, ray_mode_problems
    from mtrl.config import load_config
    from mtrl.train.budget_check import weight_notes
    from mtrl.train.preflight import check_memory

    failed = False
    for path in args.configs:
        try:
            cfg = load_config(
                path,
                **plugins.config_context(),
            )
            _check_commands(cfg, plugins, path)
            _check_trackers(cfg, path)
            check_tune_metric(cfg, plugins, path)
            if logs is not None:
                _check_envs(cfg, plugins, path, logs)
            specs = [plugins.env_spec(t.env) for t in cfg.tasks] if args.check_envs else None
            check_memory(cfg, specs, source=path, algorithms=plugins.algorithms)
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
    return failed


class _SimLogs:
    """Where the simulations ``--check-envs`` launches log: a temp folder, kept only when an
    error names a log in it (so the path it gives exists), deleted otherwise."""

    def __init__(self) -> None:
        from mtrl.plugins.external import sim_logs

        self.dir = Path(tempfile.mkdtemp(prefix="mtrl-validate-"))
        self.cited = False
        self._previous = os.environ.get(sim_logs.LOG_DIR_ENV)
        sim_logs.use_dir(self.dir / "sim-logs")

    def line(self, error: BaseException) -> str:
        """``error`` in one line; a simulation's with its last output line and whole log."""
        from mtrl.plugins.external.failure_line import one_line

        text = one_line(error)
        self.cited |= str(self.dir) in text
        return text

    def close(self) -> None:
        from mtrl.plugins.external import sim_logs

        sim_logs.use_dir(Path(self._previous) if self._previous else None)
        if not self.cited:
            shutil.rmtree(self.dir, ignore_errors=True)


def _check_trackers(cfg: Any, path: str) -> None:
    """Refuse a built-in tracker the config turns on whose package is missing (TensorBoard),
    as ``mtrl train`` would before its first step."""
    from mtrl.tracking.tensorboard_sink import summary_writer_class

    if cfg.tracking.tensorboard.enabled:
        try:
            summary_writer_class()
        except UserError as e:
            raise UserError(f"{path}: {e}") from None


def check_tune_metric(cfg: Any, plugins: Any, path: str) -> None:
    """Refuse a ``tune.metric`` the tasks cannot give (``normalized_score`` over an env with no
    reference score), which would otherwise fail inside the first population member."""
    from mtrl.config import format_loc
    from mtrl.config.lines import config_location
    from mtrl.config.tune_metric import tune_metric_problems

    def scored(env_id: str) -> bool:
        return plugins.env_spec(env_id).normalized_score(0.0) is not None

    found = tune_metric_problems(cfg, scored)
    problems = [f"{config_location(path, loc)}: {format_loc(loc)}: {text}" for loc, text in found]
    if problems:
        raise UserError("\n".join(problems), problems=problems)


def _check_commands(cfg: Any, plugins: Any, path: str) -> None:
    """Refuse tasks whose env runs a program that is missing or not executable (an external
    simulation's command) or is given env_kwargs it does not take, naming the line in the
    config."""
    from mtrl.config.lines import config_location
    from mtrl.train.task_envs import command_problems, num_envs_problems

    specs = [plugins.env_spec(t.env) for t in cfg.tasks]
    problems = [
        f"{config_location(path, ('tasks', i, 'num_envs'))}: tasks[{i}].num_envs: {text}"
        for i, text in num_envs_problems(cfg, specs)
    ]
    problems += [
        f"{config_location(path, ('tasks', i, at))}: tasks[{i}].{at}: {text}"
        for i, at, text in command_problems(cfg, specs)
    ]
    if problems:
        raise UserError("\n".join(problems), problems=problems)


def _check_envs(cfg: Any, plugins: Any, path: str, logs: _SimLogs) -> None:
    """Build one copy of every task's env with its kwargs and check that the learner can train
    on its spaces (the encoders and heads ``train`` builds), so bad kwargs and unsupported
    spaces surface now; each problem names the task's line in the config. A simulation that
    cannot start is said with its own last output line and where its whole log is."""
    from mtrl.config.lines import config_location
    from mtrl.coupling.protocol import SimulationError
    from mtrl.learner.trainable import UnsupportedSpaceError, check_trainable

    problems = []
    for i, task in enumerate(cfg.tasks):
        try:
            spec = plugins.envs.get(task.env)
            env = spec.build(num_envs=spec.num_envs_multiple, seed=0, **task.env_kwargs)
        except SimulationError as e:
            where = config_location(path, ("tasks", i, "env"))
            problems.append(f"{where}: tasks[{i}].env: {logs.line(e)}")
            continue
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
