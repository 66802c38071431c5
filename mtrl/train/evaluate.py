"""Evaluation of a checkpointed agent: N episodes per task, greedy and/or stochastic actions.

A checkpoint (see :mod:`mtrl.checkpoint`) holds ``config`` (the resolved experiment config as
JSON data) and ``learner`` (``Learner.state_dict()``: ``model``, ...). The config is validated
against the installed plugins, each task's env is rebuilt with its ``env_kwargs`` and the model
with the config's sizes; then every selected task plays ``episodes`` episodes per mode
(:func:`evaluate_model`, which the end of ``mtrl train`` also calls on the trainer's own model:
:mod:`mtrl.train.final_eval`).

Episodes are counted fairly: copy ``i`` of a batch of ``E`` env copies contributes a fixed
quota of its *first* episodes, so short episodes are not over-represented (which happens when
the first N episodes to finish are taken). Env seeds differ from the training seeds.
"""

from __future__ import annotations

import difflib
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from mtrl.actors.episodes import Finished
from mtrl.actors.inference import make_policy
from mtrl.checkpoint import load_checkpoint, load_latest
from mtrl.config import ExperimentConfig, parse_config
from mtrl.errors import CheckpointError, UserError
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import BatchEnv, EnvSpec, Plugins, get_plugins
from mtrl.train.task_envs import build_env, task_spaces

MODES = ("greedy", "stochastic")
EVAL_SEED_OFFSET = 1_000_000  # eval envs never replay a training seed


@dataclass
class EvalResult:
    """One task under one action mode."""

    task: str
    env: str
    mode: str
    episodes: int
    mean_return: float
    std_return: float
    mean_length: float
    normalized_score: float | None
    returns: list[float] = field(default_factory=list)
    success_rate: float | None = None
    """Share of the episodes that succeeded at some step (None: the env reports no success)."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (NaN, when no episode finished, becomes null)."""
        return {k: _json_safe(v) for k, v in asdict(self).items()}


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass
class EvalCheckpoint:
    """A checkpoint ready to evaluate: its validated config and learner state."""

    path: Path
    config: ExperimentConfig
    learner: dict[str, Any]
    env_steps: int | None


def load_for_eval(target: Path | str, plugins: Plugins | None = None) -> EvalCheckpoint:
    """Load ``target`` (a run directory: its newest good checkpoint; or a checkpoint file)."""
    target = Path(target)
    plugins = plugins or get_plugins()
    if target.is_dir():
        state, path = load_latest(target)
    elif target.is_file():
        state, path = load_checkpoint(target), target
    else:
        raise UserError(f"{target}: no such run directory or checkpoint file")
    missing = [k for k in ("config", "learner") if k not in state]
    if missing or "model" not in state.get("learner", {}):
        what = ", ".join(missing) or "learner.model"
        raise CheckpointError(f"{path}: not an mtrl training checkpoint (missing {what})")
    text = yaml.safe_dump(state["config"], sort_keys=False)
    known: dict[str, Any] = {"env_ids": plugins.envs.ids()}
    schedulers = getattr(plugins, "schedulers", None)  # plugin policies, where registered
    if schedulers is not None:
        known["scheduler_policies"] = schedulers.names()
    algorithms = getattr(plugins, "algorithms", None)
    if algorithms is not None:
        known["algorithms"] = algorithms.parallel_support()
    # No ``tracker_names``: evaluation runs no trackers, so a run whose tracker plugin is not
    # installed here still evaluates.
    cfg = parse_config(text, f"{path} (config)", **known)
    steps = state.get("env_steps")
    return EvalCheckpoint(path, cfg, state["learner"], int(steps) if steps is not None else None)


def select_tasks(cfg: ExperimentConfig, names: Sequence[str] | None) -> list[int]:
    """Indices of the tasks ``names`` (task names or env ids); all tasks when None/empty."""
    if not names:
        return list(range(len(cfg.tasks)))
    keys = [t.key for t in cfg.tasks]
    out, problems = [], []
    for name in names:
        hits = [i for i, t in enumerate(cfg.tasks) if name in (t.key, t.env)]
        if hits:
            out += [i for i in hits if i not in out]
            continue
        close = difflib.get_close_matches(name, keys, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"tasks: {', '.join(keys)}"
        problems.append(f"--tasks: no task named {name!r} in this checkpoint; {hint}")
    if problems:
        raise UserError("\n".join(problems), problems=problems)
    return out


def run_episodes(env: BatchEnv, policy: Any, task: int, episodes: int, max_steps: int) -> Finished:
    """Play until every copy has finished its quota of episodes; returns, lengths and, where
    the env reports success, whether each episode succeeded at some step.

    Follows the batch-env rule that the step after a done is a reset step (reward 0, not part
    of any episode). ``policy(task, obs, valid)`` learns which copies are on one (``valid``
    false), so a recurrent policy can start their next episode from a zero state
    (:func:`mtrl.actors.inference.make_policy`). Stops after ``max_steps`` batch steps with
    what it has.
    """
    n = env.num_envs
    quota = np.full(n, episodes // n) + (np.arange(n) < episodes % n)
    done_count = np.zeros(n, np.int64)
    ret = np.zeros(n, np.float64)
    length = np.zeros(n, np.int64)
    prev_done = np.zeros(n, bool)
    succeeded = np.zeros(n, bool)
    returns: list[float] = []
    lengths: list[int] = []
    successes: list[bool] = []
    obs = env.reset()
    for _ in range(max_steps):
        if (done_count >= quota).all():
            break
        valid = ~prev_done
        _, actions, _ = policy(task, obs, valid)
        out = env.step(actions)
        ret += np.where(valid, out.reward, 0.0)
        length += valid
        if out.success is not None:
            succeeded |= out.success & valid
        done = (out.terminated | out.truncated) & valid
        for i in np.flatnonzero(done):
            if done_count[i] < quota[i]:
                returns.append(float(ret[i]))
                lengths.append(int(length[i]))
                if out.success is not None:
                    successes.append(bool(succeeded[i]))
                done_count[i] += 1
        ret[done], length[done], succeeded[done] = 0.0, 0, False
        prev_done = out.terminated | out.truncated
        obs = out.obs
    return Finished(returns, lengths, successes)


def evaluate(
    ckpt: EvalCheckpoint,
    *,
    tasks: Sequence[str] | None = None,
    episodes: int = 10,
    modes: Sequence[str] = MODES,
    seed: int | None = None,
    device: str = "cpu",
    max_steps_per_episode: int = 100_000,
    plugins: Plugins | None = None,
) -> list[EvalResult]:
    """Evaluate ``ckpt`` on ``tasks`` (default all): ``episodes`` per task and mode (see
    :func:`evaluate_model`, which plays them)."""
    if episodes < 1:
        raise UserError(f"--episodes must be at least 1, got {episodes}")
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise UserError(f"unknown mode(s) {bad}; use {' or '.join(MODES)}")
    plugins = plugins or get_plugins()
    cfg = ckpt.config
    chosen = select_tasks(cfg, tasks)
    torch.set_num_threads(cfg.learner.torch_threads)
    specs = [plugins.envs.get(t.env) for t in cfg.tasks]
    spaces = [TaskSpaces(*task_spaces(spec, cfg, i, None)) for i, spec in enumerate(specs)]
    model = load_model(ckpt, spaces, device, plugins)
    return evaluate_model(
        model,
        cfg,
        specs,
        chosen,
        episodes=episodes,
        modes=modes,
        seed=seed,
        max_steps_per_episode=max_steps_per_episode,
    )


def evaluate_model(
    model: torch.nn.Module,
    cfg: ExperimentConfig,
    specs: Sequence[EnvSpec],
    chosen: Sequence[int],
    *,
    episodes: int,
    modes: Sequence[str] = MODES,
    seed: int | None = None,
    max_steps_per_episode: int = 100_000,
) -> list[EvalResult]:
    """Play ``episodes`` per task of ``chosen`` and mode with ``model`` (a checkpoint's, or the
    trainer's own at the end of a run); ``specs`` are every task's env specs.

    ``seed`` seeds task ``i``'s eval envs with ``seed + i`` (default: the training seed plus
    a large offset). Every mode starts from the same env seeds: a paired comparison. The
    numpy batch-env API serves every task, Anakin's tensor-native envs included.
    """
    seeds = {i: cfg.task_seed(i) + EVAL_SEED_OFFSET if seed is None else seed + i for i in chosen}
    sizes = {
        i: eval_size(episodes, cfg.tasks[i].num_envs, specs[i].num_envs_multiple) for i in chosen
    }
    action_spaces: list[Any] = [None] * len(cfg.tasks)  # the policy reads only its task's
    results = []
    for i in chosen:
        for mode in modes:  # a fresh env with the same seeds for each mode
            env = build_env(specs[i], cfg, i, sizes[i], seeds[i])
            try:
                action_spaces[i] = env.single_action_space
                torch.manual_seed(seeds[i])
                policy = make_policy(model, action_spaces, greedy=mode == "greedy")
                max_steps = _max_steps(episodes, sizes[i], max_steps_per_episode)
                finished = run_episodes(env, policy, i, episodes, max_steps)
            finally:
                env.close()
            results.append(_result(cfg, specs[i], i, mode, episodes, finished))
    return results


def eval_size(episodes: int, num_envs: int, multiple: int) -> int:
    """Copies to evaluate with: one per episode up to the task's ``num_envs``, rounded up to
    whole games of a multi-agent env (``multiple`` slots each; ``num_envs`` is a multiple)."""
    return min(num_envs, -(-min(episodes, num_envs) // multiple) * multiple)


def _max_steps(episodes: int, num_envs: int, per_episode: int) -> int:
    return math.ceil(episodes / num_envs) * per_episode


def build_model(
    cfg: ExperimentConfig, spaces: list[TaskSpaces], plugins: Plugins
) -> MultiTaskModel:
    """A fresh model for ``cfg``, shaped as its learning rule shapes it (``prepare_model`` of
    the rule's registration: SAC's squashed-Gaussian heads), initialised from torch's RNG."""
    model = MultiTaskModel(spaces, cfg.learner.model)
    algorithms = getattr(plugins, "algorithms", None)
    name = cfg.learner.algorithm
    if algorithms is not None and name in algorithms:
        prepare = algorithms.get(name).prepare_model
        if prepare is not None:
            prepare(model)
    return model


def load_model(
    ckpt: EvalCheckpoint, spaces: list[TaskSpaces], device: str, plugins: Plugins
) -> MultiTaskModel:
    """The checkpoint's model: built from its config (:func:`build_model`), then loaded."""
    model = build_model(ckpt.config, spaces, plugins)
    try:
        model.load_state_dict(ckpt.learner["model"])
    except RuntimeError as e:
        raise CheckpointError(
            f"{ckpt.path}: the weights do not fit the model its config describes: "
            f"{str(e).strip().splitlines()[0]}"
        ) from None
    return model.to(device).eval()


def _result(
    cfg: ExperimentConfig,
    spec: EnvSpec,
    i: int,
    mode: str,
    wanted: int,
    finished: Finished,
) -> EvalResult:
    task = cfg.tasks[i]
    returns, lengths, successes = finished
    if len(returns) < wanted:
        warnings.warn(
            f"{task.key} ({mode}): only {len(returns)} of {wanted} episodes finished in time",
            stacklevel=3,
        )
    arr = np.asarray(returns, np.float64)
    mean = float(arr.mean()) if len(arr) else math.nan
    return EvalResult(
        task=task.key,
        env=task.env,
        mode=mode,
        episodes=len(returns),
        mean_return=mean,
        std_return=float(arr.std()) if len(arr) else math.nan,
        mean_length=float(np.mean(lengths)) if lengths else math.nan,
        normalized_score=spec.normalized_score(mean) if len(arr) else None,
        returns=[float(x) for x in returns],
        success_rate=float(np.mean(successes)) if successes else None,
    )
