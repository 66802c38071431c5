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
import faulthandler
import math
import multiprocessing as mp
import os
import pickle
import queue
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from mtrl.actors.episodes import Finished
from mtrl.actors.faults import describe_exit
from mtrl.actors.inference import make_policy
from mtrl.actors.worker import ACTOR_PROCESS_ENV
from mtrl.checkpoint import load_checkpoint, load_latest
from mtrl.config import ExperimentConfig, parse_config
from mtrl.errors import CheckpointError, UserError
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import BatchEnv, EnvSpec, Plugins, get_plugins
from mtrl.train.task_envs import build_env, task_spaces

MODES = ("greedy", "stochastic")
EVAL_SEED_OFFSET = 1_000_000  # eval envs never replay a training seed


class EvalWorkerError(UserError):
    """An eval worker process died (``evaluate(..., workers=N)``); the message names the task
    it was on and how to see why."""


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
    workers: int = 1,
) -> list[EvalResult]:
    """Evaluate ``ckpt`` on ``tasks`` (default all): ``episodes`` per task and mode (see
    :func:`evaluate_model`, which plays them).

    ``workers`` > 1 plays the tasks in that many processes at once (each loads the checkpoint
    and takes whole tasks; :func:`_evaluate_in_processes`): MT50's final agent, 50 episodes per
    task and mode, is most of an hour of one core. Every task and mode keeps its own seeds, so
    the results are the same as in one process."""
    if episodes < 1:
        raise UserError(f"--episodes must be at least 1, got {episodes}")
    if workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}")
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise UserError(f"unknown mode(s) {bad}; use {' or '.join(MODES)}")
    plugins = plugins or get_plugins()
    chosen = select_tasks(ckpt.config, tasks)
    plan = _EvalPlan(episodes, tuple(modes), seed, device, max_steps_per_episode)
    if workers > 1 and len(chosen) > 1:
        keys = [t.key for t in ckpt.config.tasks]
        return _evaluate_in_processes(ckpt.path, keys, chosen, plan, workers)
    return _Evaluator(ckpt, device, plugins).play(chosen, plan)


@dataclass(frozen=True)
class _EvalPlan:
    """What to play on each task: the arguments of :func:`evaluate` that every task shares."""

    episodes: int
    modes: tuple[str, ...]
    seed: int | None
    device: str
    max_steps_per_episode: int


class _Evaluator:
    """A checkpoint's model built once, with its task specs, ready to play any of its tasks."""

    def __init__(self, ckpt: EvalCheckpoint, device: str, plugins: Plugins) -> None:
        self.cfg = ckpt.config
        torch.set_num_threads(self.cfg.learner.torch_threads)
        self.specs = [plugins.envs.get(t.env) for t in self.cfg.tasks]
        spaces = [
            TaskSpaces(*task_spaces(spec, self.cfg, i, None)) for i, spec in enumerate(self.specs)
        ]
        self.model = load_model(ckpt, spaces, device, plugins)

    def play(self, chosen: Sequence[int], plan: _EvalPlan) -> list[EvalResult]:
        return evaluate_model(
            self.model,
            self.cfg,
            self.specs,
            chosen,
            episodes=plan.episodes,
            modes=plan.modes,
            seed=plan.seed,
            max_steps_per_episode=plan.max_steps_per_episode,
        )


def _worker_main(path: str, plan: _EvalPlan, todo: Any, done: Any) -> None:
    """An eval worker: load the checkpoint once, then play the tasks ``todo`` hands out until
    it hands out None. Says which task it starts before playing it, so that the parent can
    name the task of a worker that dies; an exception goes back instead of a result."""
    # An expendable process, as an actor is: a fault injected to kill one (chaos/wrap's kill
    # and segfault) fires for real here, and the parent reports it.
    os.environ[ACTOR_PROCESS_ENV] = "eval"
    faulthandler.enable()  # a segfault's Python stack on stderr, as in actors
    try:
        evaluator = _Evaluator(load_for_eval(path), plan.device, get_plugins())
        while (task := todo.get()) is not None:
            done.put(("start", os.getpid(), task, None))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                results = evaluator.play([task], plan)
            done.put(("result", os.getpid(), task, (results, [str(w.message) for w in caught])))
    except Exception as e:  # every error goes to the parent, which raises it
        done.put(("error", os.getpid(), None, _picklable(e)))


def _picklable(e: Exception) -> Exception:
    """``e`` itself where it survives pickling (mtrl's errors do), else its type and message."""
    try:
        pickle.loads(pickle.dumps(e))
    except Exception:  # an exception class that takes other arguments, an unpicklable field
        return RuntimeError(f"{type(e).__name__}: {e}")
    return e


def _evaluate_in_processes(
    path: Path, keys: Sequence[str], chosen: Sequence[int], plan: _EvalPlan, workers: int
) -> list[EvalResult]:
    """Play ``chosen`` tasks in ``workers`` spawned processes, whole tasks each; the results
    come back in ``chosen``'s order and the workers' warnings are repeated here. A worker's
    exception is raised here; a worker that dies (a crashing env code, the OOM killer) ends the
    evaluation with one line naming the task it was playing."""
    ctx = mp.get_context("spawn")  # no forked copy of this process's threads and plugins
    todo, done = ctx.Queue(), ctx.Queue()
    for i in chosen:
        todo.put(i)
    procs = [
        ctx.Process(target=_worker_main, args=(str(path), plan, todo, done), daemon=True)
        for _ in range(min(workers, len(chosen)))
    ]
    for _ in procs:
        todo.put(None)
    for proc in procs:
        proc.start()
    playing: dict[int, str] = {}  # worker pid -> the key of the task it is on
    by_task: dict[int, tuple[list[EvalResult], list[str]]] = {}
    try:
        while len(by_task) < len(chosen):
            try:
                kind, pid, task, payload = done.get(timeout=0.5)
            except queue.Empty:
                _raise_if_a_worker_died(procs, playing)
                if all(proc.exitcode is not None for proc in procs) and done.empty():
                    missing = [keys[i] for i in chosen if i not in by_task]
                    raise EvalWorkerError(
                        f"the eval workers ended without results for {', '.join(missing)}"
                    ) from None
                continue
            if kind == "error":
                raise payload
            if kind == "start":
                playing[pid] = keys[task]
            else:
                by_task[task] = payload
                del playing[pid]
    finally:
        for proc in procs:
            proc.join(timeout=5 if len(by_task) == len(chosen) else 0)
            if proc.is_alive():
                proc.kill()
                proc.join()
    results: list[EvalResult] = []
    for i in chosen:
        task_results, messages = by_task[i]
        for message in messages:
            warnings.warn(message, stacklevel=3)
        results += task_results
    return results


def _raise_if_a_worker_died(procs: Sequence[Any], playing: dict[int, str]) -> None:
    """Raise :class:`EvalWorkerError` for a worker that has died, naming the task it was on
    (``playing``: worker pid -> task key)."""
    for proc in procs:
        if proc.exitcode in (None, 0):
            continue
        why = describe_exit(proc.exitcode, "eval worker process")
        key = playing.get(proc.pid)
        if key is None:
            raise EvalWorkerError(f"{why}, before it played a task")
        raise EvalWorkerError(
            f"{why}, while playing {key}; evaluate that task alone (--tasks {key}) to see why"
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
