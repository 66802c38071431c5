"""Where a checkpointed agent's greedy episodes go: for tasks it fails, did the hand reach the
object, did the object move, how near did it come to the goal?

A success rate of 0 says nothing of *why*. For manipulation suites whose observation holds the
hand's, the object's and the goal's positions (Meta-World: hand ``0:3``, first object ``4:7``,
goal ``36:39``, the defaults here), this plays ``--episodes`` greedy episodes per chosen task
with the agent of a run directory or checkpoint file (the eval seeds ``mtrl eval`` uses) and
reports per task: return, success, the closest the hand came to the object and where it ended,
how far the object moved, how near it came to the goal, and the actions' saturation (share of
components at ±1). Other layouts take ``--hand/--object/--goal`` as ``start:stop`` slices.

    .venv-metaworld/bin/python benchmarks/rollout_probe.py RUN_DIR_OR_CKPT \\
        --tasks metaworld/push-v3,metaworld/pick-place-v3 --episodes 5 [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtrl.actors.inference import make_policy
from mtrl.errors import UserError
from mtrl.learner.model import TaskSpaces
from mtrl.plugins import get_plugins
from mtrl.train.evaluate import (
    EVAL_SEED_OFFSET,
    load_for_eval,
    load_model,
    run_episodes,
    select_tasks,
)
from mtrl.train.task_envs import build_env, task_spaces


def parse_slice(text: str) -> slice:
    """``"a:b"`` as ``slice(a, b)`` (both given, ``0 <= a < b``)."""
    try:
        a, b = (int(p) for p in text.split(":"))
    except ValueError:
        raise UserError(f"{text!r}: give an observation slice as START:STOP, e.g. 4:7") from None
    if not 0 <= a < b:
        raise UserError(f"{text!r}: need 0 <= START < STOP")
    return slice(a, b)


@dataclass
class EpisodeProbe:
    """One greedy episode's figures (distances in the observation's units)."""

    ret: float
    success: bool | None
    min_hand_object: float
    final_hand_object: float
    object_moved: float
    min_object_goal: float
    saturated: float


def probe_episode(hand: np.ndarray, obj: np.ndarray, goal: np.ndarray) -> dict[str, float]:
    """Distances of one episode from its per-step positions ``[T, d]`` (pure)."""
    hand_obj = np.linalg.norm(hand - obj, axis=1)
    return {
        "min_hand_object": float(hand_obj.min()),
        "final_hand_object": float(hand_obj[-1]),
        "object_moved": float(np.linalg.norm(obj[-1] - obj[0])),
        "min_object_goal": float(np.linalg.norm(obj - goal, axis=1).min()),
    }


def play(
    env: Any, policy: Any, task: int, episodes: int, max_steps: int, where: dict[str, slice]
) -> list[EpisodeProbe]:
    """``episodes`` greedy episodes of one env copy, each's figures. ``mtrl eval``'s own loop
    (:func:`~mtrl.train.evaluate.run_episodes`: returns, successes, the batch-env rule) plays
    them; the policy is wrapped to keep each acting step's positions and action, and a reset
    step (``valid`` false) closes an episode."""
    done: list[tuple[dict[str, list[np.ndarray]], list[np.ndarray]]] = []
    rows: dict[str, list[np.ndarray]] = {k: [] for k in where}
    actions: list[np.ndarray] = []

    def recording(task: int, obs: Any, valid: np.ndarray) -> Any:
        nonlocal rows, actions
        out = policy(task, obs, valid)
        if not valid[0]:
            done.append((rows, actions))
            rows, actions = {k: [] for k in where}, []
            return out
        for k, sl in where.items():
            rows[k].append(np.asarray(obs[0, sl], np.float64))
        actions.append(np.asarray(out[1][0], np.float64).ravel())
        return out

    finished = run_episodes(env, recording, task, episodes, max_steps * episodes)
    if actions:
        done.append((rows, actions))
    out = []
    for n, (pos, acts) in enumerate(done[: len(finished.returns)]):
        figures = probe_episode(*(np.stack(pos[k]) for k in ("hand", "object", "goal")))
        success = finished.successes[n] if finished.successes else None
        sat = float((np.abs(np.stack(acts)) >= 0.999).mean())
        out.append(EpisodeProbe(finished.returns[n], success, saturated=sat, **figures))
    return out


def summarize(task: str, eps: list[EpisodeProbe]) -> dict[str, Any]:
    """Per task: each figure's mean over the episodes (success as a rate)."""
    row: dict[str, Any] = {"task": task, "episodes": len(eps)}
    for name in asdict(eps[0]):
        values = [getattr(e, name) for e in eps]
        if name == "success":
            row[name] = None if values[0] is None else float(np.mean(values))
        else:
            row[name] = float(np.mean(values))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", type=Path, help="a run directory (its newest checkpoint) or file")
    ap.add_argument("--tasks", help="comma-separated task names or env ids (default: all)")
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--max-steps", type=int, default=10_000, help="per episode, at most")
    ap.add_argument("--hand", default="0:3")
    ap.add_argument("--object", default="4:7")
    ap.add_argument("--goal", default="36:39")
    ap.add_argument("--seed", type=int, help="eval seed of the first task (default: mtrl eval's)")
    ap.add_argument("--json", type=Path, help="also write the table here")
    args = ap.parse_args(argv)
    try:
        if args.episodes < 1:
            raise UserError("--episodes must be at least 1")
        where = {k: parse_slice(getattr(args, k)) for k in ("hand", "object", "goal")}
        plugins = get_plugins()
        ckpt = load_for_eval(args.target, plugins)
        cfg = ckpt.config
        chosen = select_tasks(cfg, args.tasks.split(",") if args.tasks else None)
        torch.set_num_threads(1)
        specs = [plugins.envs.get(t.env) for t in cfg.tasks]
        spaces = [TaskSpaces(*task_spaces(s, cfg, i, None)) for i, s in enumerate(specs)]
        model = load_model(ckpt, spaces, "cpu", plugins)
        for i in chosen:
            size = int(np.prod(spaces[i].observation_space.shape or (0,)))
            if any(sl.stop > size for sl in where.values()):
                raise UserError(
                    f"task {cfg.tasks[i].key}: a slice reaches past its observation's "
                    f"{size} values (--hand/--object/--goal)"
                )
        rows = []
        for i in chosen:
            seed = cfg.task_seed(i) + EVAL_SEED_OFFSET if args.seed is None else args.seed + i
            env = build_env(specs[i], cfg, i, 1, seed)
            try:
                act_spaces: list[Any] = [None] * len(cfg.tasks)
                act_spaces[i] = env.single_action_space
                torch.manual_seed(seed)
                policy = make_policy(model, act_spaces, greedy=True)
                eps = play(env, policy, i, args.episodes, args.max_steps, where)
            finally:
                env.close()
            rows.append(summarize(cfg.tasks[i].key, eps))
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    head = [
        "task",
        "return",
        "success",
        "min hand-obj",
        "end hand-obj",
        "obj moved",
        "min obj-goal",
        "saturated",
    ]
    print(" | ".join(head))
    for r in rows:
        succ = "-" if r["success"] is None else f"{r['success']:.2f}"
        print(
            f"{r['task']} | {r['ret']:.1f} | {succ} | {r['min_hand_object']:.3f} | "
            f"{r['final_hand_object']:.3f} | {r['object_moved']:.3f} | "
            f"{r['min_object_goal']:.3f} | {r['saturated']:.2f}"
        )
    if args.json:
        doc = {"target": str(ckpt.path), "env_steps": ckpt.env_steps, "rows": rows}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
