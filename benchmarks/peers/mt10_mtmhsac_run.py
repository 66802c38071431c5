"""One seed of the Meta-World+ authors' multi-task multi-head SAC (MTMHSAC) on MT10, run in the
``metaworld_algorithms`` peer venv (Python 3.12, JAX's CPU build; ``venvs.py``), with its
training curve recorded and its final agent evaluated by mtrl's MT10 protocol.

The algorithm, networks, replay and training loop are the authors' own
(``metaworld_algorithms.rl.algorithms.MTSAC`` and ``OffPolicyAlgorithm.train``), configured as
their ``examples/multi_task/mtmhsac_mt10.py`` is (:func:`peer_config`); only the total env
steps and the seed come from the command line. What this script adds, and why:

* Their ``Run.start`` refuses to run without a GPU or TPU, so the script does what it does
  itself: ``MTSAC.initialize``, their orbax checkpoint manager (a checkpoint at each of their
  evaluations, every 200,000 env steps; ``--resume`` restores the newest as ``Run`` does), and
  ``train``, with wandb off. Their end-of-run extras (a final checkpoint, wandb artifacts) are
  left out.
* Their ``MetaworldConfig.spawn`` steps the ten tasks in ten subprocesses (``async``); here
  they are stepped in this process (``sync``) so that the run uses one core, like mtrl's
  serial-actor runs. Everything else about the envs is theirs (v2 reward, one-hot task ids,
  500-step episodes, 50 goals per task drawn at random on every reset, no termination on
  success while training).
* A vector-env wrapper (:class:`TrainingRecorder`) watches the training steps and writes
  ``metrics.jsonl`` in mtrl's keys (``charts/env_steps``, ``charts/elapsed_s``,
  ``task/metaworld/<task>/success`` over each task's last 20 episodes, an episode succeeding
  if any step does), which ``benchmarks/metaworld_figure.py`` draws; the authors' own logs (losses,
  SPS, their periodic evaluation) are caught from their ``log`` hook and kept beside them.
* The final agent is evaluated twice: by mtrl's protocol (:func:`evaluate_each_goal`: greedy
  actions, 50 episodes per task, episode ``k`` on the task's goal ``k``, success if any step
  succeeds) and by the authors' (``metaworld.evaluation.evaluation``, as their ``Run`` does at
  the end: greedy, 50 episodes per task, each on a goal drawn at random, an episode ending at
  its first success).

    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
        OMP_NUM_THREADS=1 benchmarks/peers/.venvs/metaworld_algorithms/bin/python \\
        benchmarks/peers/mt10_mtmhsac_run.py --seed 1 --total-env-steps 500000 --run-dir DIR

Normally started by ``benchmarks/peers/mt10_mtmhsac.py``, which sets those variables.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib.metadata
import json
import random
import shutil
import time
from collections import deque
from pathlib import Path
from typing import Any

import gymnasium as gym
import jax
import metaworld_algorithms.rl.algorithms.base as peer_base
import numpy as np
import orbax.checkpoint as ocp
from metaworld.env_dict import MT10_V3
from metaworld.evaluation import evaluation
from metaworld_algorithms.checkpoint import get_checkpoint_restore_args, load_env_checkpoints
from metaworld_algorithms.config.networks import ContinuousActionPolicyConfig, QValueFunctionConfig
from metaworld_algorithms.config.nn import MultiHeadConfig
from metaworld_algorithms.config.optim import OptimizerConfig
from metaworld_algorithms.config.rl import OffPolicyTrainingConfig
from metaworld_algorithms.envs import MetaworldConfig
from metaworld_algorithms.rl.algorithms import MTSACConfig, get_algorithm_for_config

#: MT10's tasks in the order of their one-hot ids and of the vector env's copies (Meta-World's
#: own list; mtrl's plugin names them ``metaworld/<task>``).
MT10: tuple[str, ...] = tuple(MT10_V3)
WINDOW = 20  # episodes per task in the training success, as mtrl's ``task/<env>/success``
VERSIONS = ("jax", "jaxlib", "flax", "optax", "distrax", "metaworld", "mujoco", "gymnasium")


class SyncMetaworldConfig(MetaworldConfig):
    """The authors' MT10 env config with the tasks stepped in this process (``sync``) and
    :data:`recorder` paused while their evaluation runs on the training envs."""

    recorder: TrainingRecorder | None = None

    def spawn(self, seed: int = 1) -> gym.vector.VectorEnv:
        """Their ``spawn`` with ``vector_strategy="sync"`` instead of ``"async"``."""
        return gym.make_vec(
            f"Meta-World/{self.env_id}",
            seed=seed,
            use_one_hot=self.use_one_hot,
            terminate_on_success=self.terminate_on_success,
            vector_strategy="sync",
            max_episode_steps=self.max_episode_steps,
            reward_function_version=self.reward_func_version,
            reward_normalization_method=self.reward_normalization_method,
            normalize_observations=self.normalize_observations,
            num_goals=self.num_goals,
        )

    def evaluate(self, envs: Any, agent: Any) -> tuple[float, float, dict[str, float]]:
        """Their evaluation, its steps kept out of the training curve."""
        recorder = SyncMetaworldConfig.recorder
        if recorder is not None:
            recorder.recording = False
        try:
            result = super().evaluate(envs, agent)
        finally:
            if recorder is not None:
                recorder.recording = True
        if recorder is not None:
            recorder.peer_logs["peer_eval/mean_success_rate"] = float(result[0])
            recorder.peer_logs["peer_eval/env_steps"] = float(recorder.env_steps)
        return result


class TrainingRecorder(gym.vector.VectorWrapper):
    """Passes the training envs through unchanged and records, every ``every`` env steps, the
    env steps, wall seconds and each task's success and return over its last
    :data:`WINDOW` episodes to ``metrics.jsonl`` (mtrl's keys).

    An episode succeeds if ``info["success"]`` is set at any of its steps (Meta-World's
    protocol); under gymnasium's same-step autoreset the last step's info is in
    ``final_info``. ``peer_logs`` holds the latest of the authors' own logged values, copied
    into each record."""

    def __init__(self, env: gym.vector.VectorEnv, path: Path, every: int) -> None:
        super().__init__(env)
        self.path, self.every = path, every
        self.recording = True
        self.env_steps = 0
        self.start = time.perf_counter()
        self.cpu_start = time.process_time()
        self.next_record = every
        self.peer_logs: dict[str, float] = {}
        self.records: list[dict[str, Any]] = []
        n = env.num_envs
        self.any_success = np.zeros(n, dtype=bool)
        self.ep_return = np.zeros(n)
        self.episodes = np.zeros(n, dtype=int)
        self.successes: list[deque[float]] = [deque(maxlen=WINDOW) for _ in range(n)]
        self.returns: list[deque[float]] = [deque(maxlen=WINDOW) for _ in range(n)]

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The wrapped vector env's ``call`` (used by the authors' evaluation)."""
        return self.env.call(name, *args, **kwargs)

    def get_attr(self, name: str) -> Any:
        """The wrapped vector env's ``get_attr``."""
        return self.env.get_attr(name)

    def set_attr(self, name: str, values: Any) -> None:
        """The wrapped vector env's ``set_attr``."""
        self.env.set_attr(name, values)

    def reset(self, **kwargs: Any) -> Any:
        """Reset every env; episodes cut short by it are not counted."""
        self.any_success[:] = False
        self.ep_return[:] = 0.0
        return self.env.reset(**kwargs)

    def step(self, actions: Any) -> Any:
        """Step the envs, count the steps and finished episodes while recording."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        if not self.recording:
            return obs, rewards, terminations, truncations, infos
        done = np.logical_or(terminations, truncations)
        success = np.asarray(infos.get("success", np.zeros(len(done))), dtype=bool)
        if done.any():
            final = np.asarray(infos["final_info"]["success"], dtype=bool)
            success = np.where(done, final, success)
        self.any_success |= success
        self.ep_return += rewards
        for i in np.flatnonzero(done):
            self.successes[i].append(float(self.any_success[i]))
            self.returns[i].append(float(self.ep_return[i]))
            self.episodes[i] += 1
        self.any_success[done] = False
        self.ep_return[done] = 0.0
        self.env_steps += len(done)
        if self.env_steps >= self.next_record:
            self.write_record()
            self.next_record += self.every
        return obs, rewards, terminations, truncations, infos

    def resume_at(self, env_steps: int) -> None:
        """Continue the records of an earlier attempt from ``env_steps`` (a checkpoint's): the
        later records are dropped, and the clocks go on from the last one kept."""
        kept = []
        if self.path.exists():
            lines = self.path.read_text().splitlines()
            kept = [json.loads(ln) for ln in lines if ln]
            kept = [r for r in kept if r["charts/env_steps"] <= env_steps]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self.records = kept
        self.env_steps = env_steps
        self.next_record = (env_steps // self.every + 1) * self.every
        if kept:
            self.start -= kept[-1]["charts/elapsed_s"]
            self.cpu_start -= kept[-1]["charts/cpu_s"]

    def write_record(self) -> None:
        """Append one record (mtrl's metric keys) to ``metrics.jsonl``."""
        rec: dict[str, Any] = {
            "charts/env_steps": self.env_steps,
            "charts/elapsed_s": time.perf_counter() - self.start,
            # this process's CPU seconds: the wall time it would take alone on a core
            "charts/cpu_s": time.process_time() - self.cpu_start,
        }
        for i, name in enumerate(MT10):
            key = f"task/metaworld/{name}"
            rec[f"{key}/env_steps"] = self.env_steps // len(MT10)
            rec[f"{key}/episodes"] = int(self.episodes[i])
            if self.successes[i]:
                rec[f"{key}/success"] = float(np.mean(self.successes[i]))
                rec[f"{key}/return"] = float(np.mean(self.returns[i]))
        rec.update({f"peer/{k}": v for k, v in self.peer_logs.items()})
        self.records.append(rec)
        with self.path.open("a") as f:
            f.write(json.dumps(rec) + "\n")


def catch_peer_logs(recorder: TrainingRecorder) -> None:
    """Route the authors' ``log`` (wandb in their runs) into ``recorder.peer_logs``."""

    def log(logs: dict[str, Any], step: int) -> None:
        for key, value in logs.items():
            try:
                arr = np.asarray(value)
            except (TypeError, ValueError):
                continue
            if arr.size == 1 and np.issubdtype(arr.dtype, np.number):
                recorder.peer_logs[key] = float(arr)
        recorder.peer_logs["step"] = float(step)

    peer_base.log = log  # their module-level name, looked up at each call


def checkpoint_manager(run_dir: Path, keep: int = 2) -> ocp.CheckpointManager:
    """Their ``Run``'s orbax checkpoints (agent, env states, RNG states, metadata, replay) in
    ``run_dir/checkpoints``, the newest ``keep`` kept. Their training loop saves one at each of
    its evaluations (every 400 episodes: 200,000 env steps on MT10). Saved synchronously: with
    orbax's default asynchronous save, the replay's nested JSON item (its RNG state) failed here
    to find its temporary directory (FileNotFoundError), and the save with it."""
    return ocp.CheckpointManager(
        (run_dir / "checkpoints").absolute(),
        item_names=("agent", "env_states", "rngs", "metadata", "buffer"),
        options=ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True, enable_async_checkpointing=False
        ),
    )


def restore(
    manager: ocp.CheckpointManager, agent: Any, cfg: dict, envs: Any
) -> tuple[Any, Any, Any]:
    """The newest checkpoint, as their ``Run.start`` restores it on ``resume``: the agent, the
    envs' states, Python's and numpy's RNG states; with the metadata and the replay for their
    ``train``. Nothing to restore: the agent as given and two Nones."""
    step = manager.latest_step()
    if step is None:
        return agent, None, None
    replay = agent.spawn_replay_buffer(cfg["env"], cfg["training"], cfg["seed"])
    ckpt = manager.restore(step, args=get_checkpoint_restore_args(agent, replay))
    load_env_checkpoints(envs, ckpt["env_states"])
    random.setstate(ckpt["rngs"]["python_rng_state"])
    np.random.set_state(ckpt["rngs"]["global_numpy_rng_state"])
    return ckpt["agent"], ckpt["metadata"], ckpt["buffer"]


def peer_config(seed: int, total_env_steps: int, warmstart_env_steps: int | None) -> dict:
    """The authors' ``examples/multi_task/mtmhsac_mt10.py`` settings, with the env-step budget
    (and, for smoke runs only, the random warm-start) from the command line."""
    env = SyncMetaworldConfig(env_id="MT10", terminate_on_success=False)
    algorithm = MTSACConfig(
        num_tasks=10,
        gamma=0.99,
        actor_config=ContinuousActionPolicyConfig(
            network_config=MultiHeadConfig(
                num_tasks=10, optimizer=OptimizerConfig(max_grad_norm=1.0)
            )
        ),
        critic_config=QValueFunctionConfig(
            network_config=MultiHeadConfig(
                num_tasks=10,
                optimizer=OptimizerConfig(max_grad_norm=1.0),
            )
        ),
        num_critics=2,
    )
    training = OffPolicyTrainingConfig(
        total_steps=total_env_steps, buffer_size=int(1e6), batch_size=1280
    )
    if warmstart_env_steps is not None:  # their warm-start counts vector steps (10 env steps)
        training = dataclasses.replace(training, warmstart_steps=warmstart_env_steps // 10)
    return {"seed": seed, "env": env, "algorithm": algorithm, "training": training}


def evaluate_each_goal(env: SyncMetaworldConfig, agent: Any, seed: int, episodes: int) -> dict:
    """mtrl's MT10 protocol on the authors' agent: greedy actions (their ``eval_action``, the
    mode of the squashed Gaussian), episode ``k`` of every task on that task's goal
    ``k mod 50`` (the 50 goals the run trained on, made by Meta-World from the run's seed),
    up to 500 steps, success if any step succeeds. The ten tasks step together, one batch
    through the policy per step. Returns per task the success rate, the per-episode successes
    and the mean return."""
    envs = env.spawn(seed=seed)
    subs = envs.unwrapped.envs
    for sub in subs:
        sub.get_wrapper_attr("toggle_sample_tasks_on_reset")(False)
    goals = [sub.get_wrapper_attr("tasks") for sub in subs]
    results = {name: {"successes": [], "returns": []} for name in MT10}
    for k in range(episodes):
        obs = []
        for sub, tasks in zip(subs, goals, strict=True):
            sub.unwrapped.set_task(tasks[k % len(tasks)])
            obs.append(sub.reset()[0])
        live = np.ones(len(subs), dtype=bool)
        success = np.zeros(len(subs), dtype=bool)
        ret = np.zeros(len(subs))
        batch = np.stack(obs)
        while live.any():
            actions = np.asarray(agent.eval_action(batch))
            for i in np.flatnonzero(live):
                o, r, term, trunc, info = subs[i].step(actions[i])
                batch[i] = o
                ret[i] += r
                success[i] |= bool(info["success"])
                live[i] = not (term or trunc)
        for i, name in enumerate(MT10):
            results[name]["successes"].append(int(success[i]))
            results[name]["returns"].append(float(ret[i]))
    envs.close()
    return {
        name: {
            "greedy_success": float(np.mean(r["successes"])),
            "greedy_return": float(np.mean(r["returns"])),
            "successes": r["successes"],
        }
        for name, r in results.items()
    }


def plain(obj: Any) -> Any:
    """A JSON-ready copy of a config dataclass (enums and callables by name)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    if isinstance(obj, int | float | str | bool) or obj is None:
        return obj
    return str(obj)


def main(argv: list[str] | None = None) -> int:
    """Train one seed, evaluate it both ways, write ``result.json`` in the run dir."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--total-env-steps", type=int, required=True)
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--eval-episodes", type=int, default=50)
    ap.add_argument("--record-every", type=int, default=10_000, help="env steps per record")
    ap.add_argument(
        "--warmstart-env-steps",
        type=int,
        default=None,
        help="random env steps before learning (the authors' 40,000 unless set; smoke runs)",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="continue from the run dir's newest checkpoint (one is saved every 200k env steps)",
    )
    args = ap.parse_args(argv)
    args.run_dir.mkdir(parents=True, exist_ok=True)
    metrics = args.run_dir / "metrics.jsonl"
    cfg = peer_config(args.seed, args.total_env_steps, args.warmstart_env_steps)
    env_cfg, algo_cfg, training = cfg["env"], cfg["algorithm"], cfg["training"]

    random.seed(args.seed)  # as their Run.start does
    np.random.seed(args.seed)
    envs = TrainingRecorder(env_cfg.spawn(seed=args.seed), metrics, args.record_every)
    SyncMetaworldConfig.recorder = envs
    catch_peer_logs(envs)
    agent = get_algorithm_for_config(algo_cfg).initialize(algo_cfg, env_cfg, seed=args.seed)
    if not args.resume:  # a fresh start: an earlier attempt's checkpoints would clash
        shutil.rmtree(args.run_dir / "checkpoints", ignore_errors=True)
    manager = checkpoint_manager(args.run_dir)
    metadata = replay = None
    if args.resume:
        agent, metadata, replay = restore(manager, agent, cfg, envs)
    resumed_at = None if metadata is None else int(metadata["step"]) * envs.num_envs
    if resumed_at is not None:
        envs.resume_at(resumed_at)
        print(f"resumed from the checkpoint at {resumed_at} env steps", flush=True)
    else:  # a fresh start: an earlier attempt's records (if any) go
        metrics.unlink(missing_ok=True)
    agent = agent.train(
        config=training,
        envs=envs,
        env_config=env_cfg,
        seed=args.seed,
        track=True,  # their logs go to catch_peer_logs's hook, not to wandb
        checkpoint_manager=manager,
        checkpoint_metadata=metadata,
        buffer_checkpoint=replay,
        recording=None,
    )
    manager.wait_until_finished()
    manager.close()
    if not envs.records or envs.records[-1]["charts/env_steps"] != envs.env_steps:
        envs.write_record()
    # summed over the attempts of a resumed run (the clocks go on from the checkpoint's record)
    train_wall_s = envs.records[-1]["charts/elapsed_s"]
    train_cpu_s = envs.records[-1]["charts/cpu_s"]
    warm = training.warmstart_steps * envs.num_envs
    # The learning phase's rate, from the second record past the warm start on (the first
    # interval holds the compilation of the update).
    learning = [r for r in envs.records if r["charts/env_steps"] > warm + args.record_every]
    sps_learning = sps_learning_cpu = None
    if len(learning) >= 2:
        a, b = learning[0], learning[-1]
        steps = b["charts/env_steps"] - a["charts/env_steps"]
        sps_learning = steps / (b["charts/elapsed_s"] - a["charts/elapsed_s"])
        sps_learning_cpu = steps / (b["charts/cpu_s"] - a["charts/cpu_s"])

    t1 = time.perf_counter()
    ours = evaluate_each_goal(env_cfg, agent, args.seed, args.eval_episodes)
    eval_wall_s = time.perf_counter() - t1
    SyncMetaworldConfig.recorder = None
    t2 = time.perf_counter()
    theirs = evaluation(agent, envs.env, num_episodes=args.eval_episodes)
    peer_eval_wall_s = time.perf_counter() - t2
    envs.close()

    params = {k: int(v) for k, v in agent.get_num_params().items()}
    result = {
        "seed": args.seed,
        "env_steps": envs.env_steps,
        "train_wall_s": train_wall_s,
        "eval_wall_s": eval_wall_s,
        "train_cpu_s": train_cpu_s,
        "resumed_at_env_steps": resumed_at,
        "env_steps_per_s": envs.env_steps / train_wall_s,
        "env_steps_per_s_learning": sps_learning,
        "env_steps_per_cpu_s_learning": sps_learning_cpu,
        "warmstart_env_steps": warm,
        "gradient_steps": max(0, envs.env_steps // envs.num_envs - training.warmstart_steps - 1),
        "tasks": {f"metaworld/{name}": r for name, r in ours.items()},
        "peer_protocol_eval": {
            "mean_success_rate": theirs[0],
            "mean_return": theirs[1],
            "per_task": {f"metaworld/{k}": v for k, v in theirs[2].items()},
            "wall_s": peer_eval_wall_s,
        },
        "num_params": params,
        "versions": {p: importlib.metadata.version(p) for p in VERSIONS},
        "jax_devices": [str(d) for d in jax.devices()],
        "config": {
            "env": plain(env_cfg),
            "algorithm": plain(algo_cfg),
            "training": plain(training),
        },
    }
    (args.run_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    mean = np.mean([r["greedy_success"] for r in ours.values()])
    print(
        f"seed {args.seed}: {envs.env_steps} env steps in {train_wall_s:.0f} s "
        f"({result['env_steps_per_s']:.1f}/s; learning {sps_learning}); greedy success "
        f"{mean:.3f} (mtrl's protocol), {theirs[0]:.3f} (the authors')",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
