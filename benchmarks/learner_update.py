"""How fast the learner's update runs alone on a config's batch shape: updates per second.

    .venv/bin/python benchmarks/learner_update.py [configs/quickstart.yaml] [--updates 50]
    # prints ms per update, writes docs/results/learner_update_<config name>.json
    .venv/bin/python benchmarks/learner_update.py CONFIG --gradients sum,pcgrad,cagrad
    # the cost of combining the tasks' gradients, side by side (learner_update_gradients_*)
    .venv/bin/python benchmarks/learner_update.py CONFIG --fused
    # Adam fused (the default) against unfused, side by side (learner_update_fused_*)
    .venv/bin/python benchmarks/learner_update.py CONFIG --stacked
    # tasks' same-shaped networks in one batched call (the default on a GPU) against one
    # call per task, side by side (learner_update_stacked_*; mtrl.learner.stacked)
    .venv/bin/python benchmarks/learner_update.py CONFIG --stacked-step
    # SAC's stacked gradient step (the default) against the per-task step, side by side
    # (learner_update_stacked_step_*; mtrl.algorithms.sac.stacked_step)
    .venv/bin/python benchmarks/learner_update.py CONFIG --device cuda --graphed
    # SAC's stacked step replayed as a CUDA graph (the default on a GPU) against it run
    # eagerly (learner_update_graphed_*; mtrl.algorithms.sac.graphed)
    .venv/bin/python benchmarks/learner_update.py CONFIG --device cuda --device-draw
    # SAC's batches drawn on the device from a mirror of the replay (the default on a GPU)
    # against drawn on the host (learner_update_device_draw_*; .sac.device_replay)
    .venv/bin/python benchmarks/learner_update.py configs/mt10.yaml --box-spaces 39:4
    # a suite's shapes where its envs are not installed (Meta-World's: Box(39) / Box(4))

Each run also prints the step's anatomy (``benchmarks/step_anatomy.py``): its FLOPs, the
**arithmetic floor** — every matmul the step makes timed alone on its shapes, summed — and the
step's time over it, the aten ops per step, and on a GPU the kernel launches, kernels and the
device's busy share. The side-by-side flags (``--gradients``, ``--fused``, ``--stacked``, ...)
run in ``benchmarks/learner_compare.py``; ``benchmarks/commits_side_by_side.py`` runs this
benchmark at two commits, alternating, for speed-ups against an older commit.

Each task gets one block of ``num_envs`` columns × ``unroll_length`` steps per update (the
smallest batch a run's learner takes when every task's actor delivers one unroll), filled
with observations and actions sampled from the task's spaces; the model and learner are the
config's (``learner.algorithm``, built through the registry as a run builds it), on one torch
thread (``learner.torch_threads``). Set beside a run's updates per second (``charts/updates``
over ``charts/elapsed_s``) it tells whether that run waits on its learner or on its data
(docs/BENCHMARKS.md, "What bounds breakout in the quickstart").

The learner runs on ``learner.device`` (``--device`` overrides it; ``auto`` is the GPU when
there is one) and the clock is read after the device has finished. ``--profile N`` then records
N more updates with ``torch.profiler`` and prints where their time goes (the ops by self CPU
time, and by self device time on a GPU) with the GPU's busy fraction over those updates.

A replay-based rule (``sac``) stores each block and takes the gradient steps its replay ratio
owes: its replays are first filled past ``learning_starts`` (untimed), and the figure that
bounds its run is **ms per gradient step** (also printed), which with the replay ratio gives
the env steps per second the learner can keep up with. **ms per draw** times the drawing of a
step's batch alone (sampling the host replays, gathering, moving to the device), and its
share of the gradient step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces as gym_spaces

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result
from step_anatomy import anatomy as step_anatomy
from step_anatomy import profiled, sync

from mtrl.algorithms import make_learner
from mtrl.config import load_config
from mtrl.learner.batch import TaskBatch, task_batch
from mtrl.learner.device import resolve_device
from mtrl.learner.distributed import DistContext
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import get_plugins

ROOT = Path(__file__).resolve().parent.parent


def task_block(task: int, spaces: TaskSpaces, steps: int, columns: int, seed: int) -> TaskBatch:
    """One task's block of ``columns`` env copies × ``steps`` steps, sampled from its spaces."""
    obs_space, act_space = spaces.observation_space, spaces.action_space
    obs_space.seed(seed)
    act_space.seed(seed)
    obs = np.stack([[obs_space.sample() for _ in range(columns)] for _ in range(steps + 1)])
    acts = np.stack([[act_space.sample() for _ in range(columns)] for _ in range(steps)])
    g = torch.Generator().manual_seed(seed)
    none = torch.zeros(steps, columns, dtype=torch.bool)
    return TaskBatch(
        task=task,
        obs=torch.as_tensor(obs),
        actions=torch.as_tensor(acts),
        behaviour_logp=-torch.rand(steps, columns, generator=g),
        rewards=torch.randn(steps, columns, generator=g),
        terminated=none,
        truncated=none,
        valid=torch.ones(steps, columns, dtype=torch.bool),
        policy_version=0,
    )


def profile_updates(learner: Any, batches: list[TaskBatch], updates: int) -> dict[str, Any]:
    """Where ``updates`` more updates spend their time: the top ops by self CPU time and (on a
    GPU) by self device time, and the device's busy time over the updates' wall time."""
    device = learner.device
    prof, wall = profiled(lambda: learner.update(batches), updates, device)
    events = prof.key_averages()
    out: dict[str, Any] = {
        "updates": updates,
        "wall_ms_per_update": wall / updates * 1e3,
        "by_cpu": events.table(sort_by="self_cpu_time_total", row_limit=15),
    }
    if device.type == "cuda":
        busy_us = sum(e.self_device_time_total for e in events)
        out["device_busy_fraction"] = busy_us / 1e6 / wall
        out["by_device"] = events.table(sort_by="self_cuda_time_total", row_limit=15)
    return out


def ms_per_draw(learner: Any, draws: int) -> float:
    """Milliseconds per batch a replay rule draws for one gradient step (its host replays
    sampled, the batch gathered and moved to the device), the device finished: the part of a
    gradient step that where the replay lives decides (``benchmarks/replay_device.py``)."""
    ready = learner.ready_tasks()
    draws = max(int(draws), 20)
    sync(learner.device)
    start = time.perf_counter()
    for _ in range(draws):
        learner._sample(ready)  # the draw alone, as each gradient step makes it
    sync(learner.device)
    return (time.perf_counter() - start) / draws * 1e3


def syncs_per_step(learner: Any, steps: int = 5) -> dict[str, float]:
    """Where a replay rule's gradient steps wait for the GPU: the places (file:line) that
    ``torch.cuda.set_sync_debug_mode`` reports, and how often per step (each one stalls the
    host until the queued kernels finish, so the step's launches and its kernels take turns)."""
    import warnings
    from collections import Counter

    ready = learner.ready_tasks()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(steps):
                learner._gradient_step(ready)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    where = Counter(f"{Path(w.filename).name}:{w.lineno}" for w in caught)
    return {"total": len(caught) / steps, **{k: n / steps for k, n in where.most_common()}}


def measure(
    config: Path,
    updates: int,
    device_name: str | None = None,
    profile: int = 0,
    gradients: str | None = None,
    task_copies: int = 1,
    anatomy: bool = False,
    box_spaces: str | None = None,
    sac_settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Milliseconds per update (after 5 warm-up updates) on the config's smallest batch
    (``gradients`` overrides ``learner.multitask.gradients``; ``task_copies`` trains each task
    as that many tasks of its shape, each with its own encoder and head; ``anatomy``: also
    the step's FLOPs, arithmetic floor and op counts, :mod:`step_anatomy`; ``box_spaces``
    ``"OBS:ACT"``: every task gets a float ``Box(OBS)`` observation and ``Box(ACT)`` action in
    ``[-1, 1]`` instead of its env's, so a suite's shapes run where its envs are not installed:
    ``39:4`` is Meta-World's; ``sac_settings``: ``learner.sac`` fields to set)."""
    plugins = get_plugins()
    context = plugins.config_context()  # with the rules' model defaults
    if box_spaces is not None:  # the suite's envs need not be installed: ids are not checked
        context["env_ids"] = None
    cfg = load_config(config, **context)
    for field, value in (sac_settings or {}).items():
        setattr(cfg.learner.sac, field, value)
    if task_copies > 1:  # a suite of many same-shaped tasks (MT10's shape) from any config
        cfg.tasks = [
            t.model_copy(update={"name": f"{t.key}#{i}"})
            for t in cfg.tasks
            for i in range(task_copies)
        ]
    if device_name is not None:
        cfg.learner.device = device_name
    if gradients is not None:
        cfg.learner.multitask.gradients = gradients  # type: ignore[assignment]
    device = resolve_device(cfg.learner.device)
    spaces = []
    for t in cfg.tasks:
        if box_spaces is not None:
            obs, act = (int(x) for x in box_spaces.split(":"))
            spaces.append(
                TaskSpaces(
                    gym_spaces.Box(-np.inf, np.inf, (obs,), np.float32),
                    gym_spaces.Box(-1.0, 1.0, (act,), np.float32),
                )
            )
            continue
        spec = plugins.envs.get(t.env)
        spaces.append(TaskSpaces(spec.observation_space, spec.action_space))
    torch.set_num_threads(cfg.learner.torch_threads)
    torch.manual_seed(cfg.seed)
    model = MultiTaskModel(spaces, cfg.learner.model).to(device)
    spec = plugins.algorithms.get(cfg.learner.algorithm)
    if spec.prepare_model is not None:
        spec.prepare_model(model)
    learner = make_learner(
        plugins,
        model,
        cfg.learner,
        [t.key for t in cfg.tasks],
        DistContext(),
        None,
        [t.learning_rate_scale for t in cfg.tasks],  # the optimiser's groups, as in a run
    )
    steps = cfg.learner.unroll_length
    batches = [  # on the device already, as the trainer hands them over
        task_batch(task_block(i, s, steps, t.num_envs, i), device)
        for i, (s, t) in enumerate(zip(spaces, cfg.tasks, strict=True))
    ]
    warmup = 5
    if cfg.learner.algorithm == "sac":  # fill every replay past learning_starts first, then
        # one update: it already takes a replay ratio's worth of gradient steps
        per_update = steps * min(t.num_envs for t in cfg.tasks)
        warmup = 1 + -(-learner.sac.learning_starts // per_update)  # the validated settings
    for _ in range(warmup):
        stats = learner.update(batches)
    gradient_steps = stats.get("sac/gradient_steps")
    sync(device)
    start = time.perf_counter()
    for _ in range(updates):
        stats = learner.update(batches)
    sync(device)
    seconds = time.perf_counter() - start
    ms = seconds / updates * 1e3
    result: dict[str, Any] = {
        "config": str(config),
        "algorithm": cfg.learner.algorithm,
        "tasks": [t.key for t in cfg.tasks],
        "task_copies": task_copies,
        "samples_per_update": steps * sum(t.num_envs for t in cfg.tasks),
        "updates": updates,
        "gradients": cfg.learner.multitask.gradients,
        "ms_per_update": ms,
        "updates_per_s": 1e3 / ms,
        "torch_threads": cfg.learner.torch_threads,
        "device": str(device),
    }
    if gradient_steps is not None:
        taken = stats["sac/gradient_steps"] - gradient_steps
        result["gradient_steps"] = taken
        result["ms_per_gradient_step"] = seconds / taken * 1e3
        result["env_steps_per_s_bound"] = result["samples_per_update"] * updates / seconds
        result["ms_per_draw"] = ms_per_draw(learner, taken)
        result["draw_share"] = result["ms_per_draw"] / result["ms_per_gradient_step"]
        if device.type == "cuda":
            result["host_syncs_per_gradient_step"] = syncs_per_step(learner)
    if anatomy:  # per gradient step for a replay rule, per update for IMPALA
        if gradient_steps is not None:
            ready = learner.ready_tasks()
            result["anatomy"] = step_anatomy(lambda: learner._gradient_step(ready), device)
        else:
            result["anatomy"] = step_anatomy(lambda: learner.update(batches), device)
    if profile:
        result["profile"] = profile_updates(learner, batches, profile)
    return result


def anatomy_line(a: dict[str, Any]) -> str:
    """One line of :func:`step_anatomy.anatomy`'s figures."""
    if a["gflop"] > 0:
        line = (
            f"  step anatomy: {a['gflop']:.3f} GFLOP, matmul floor {a['matmul_floor_ms']:.2f} ms "
            f"({a['matmul_gflops']:.0f} GFLOP/s on the step's shapes), {a['ms_per_step']:.2f} "
            f"ms per step = {a['ratio_to_floor']:.2f}x the floor, {a['aten_ops']:.0f} aten ops"
        )
    else:  # a replayed CUDA graph: nothing dispatched to count
        line = f"  step anatomy: {a['ms_per_step']:.2f} ms per step (a replayed graph)"
    if "kernels" in a:
        line += (
            f", {a['kernel_launches']:.0f} kernel launches / {a['kernels']:.0f} kernels, "
            f"device busy {a['device_busy_share']:.0%}"
        )
        if "device_span_ms_per_step" in a:
            line += (
                f"; the host queues a step in {a['host_ms_per_step']:.2f} ms, the device's "
                f"kernels span {a['device_span_ms_per_step']:.2f} ms a step, busy "
                f"{a['busy_share_of_span']:.0%} of it"
            )
    return line


def copies_suffix(task_copies: int) -> str:
    """The result name's mark of ``--task-copies`` (so a copied suite never overwrites the
    config's own figure)."""
    return f"_x{task_copies}" if task_copies > 1 else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", type=Path, nargs="?", default=ROOT / "configs" / "quickstart.yaml")
    ap.add_argument("--updates", type=int, default=50)
    ap.add_argument("--out-dir", type=Path, default=None)
    ap.add_argument("--device", default=None, help="overrides learner.device (cpu, cuda, ...)")
    ap.add_argument("--profile", type=int, default=0, help="profile this many more updates")
    ap.add_argument(
        "--task-copies",
        type=int,
        default=1,
        help="train each task of the config as N tasks of its shape (e.g. 5: Pendulum and "
        "CartPole as ten tasks, MT10's shape without Meta-World)",
    )
    ap.add_argument(
        "--box-spaces",
        metavar="OBS:ACT",
        help="give every task a float Box(OBS) observation and Box(ACT) action instead of its "
        "env's (e.g. 39:4, Meta-World's shapes, where Meta-World is not installed)",
    )
    ap.add_argument(
        "--gradients",
        help="comma-separated learner.multitask.gradients to time side by side in 3 "
        "interleaved rounds, e.g. sum,pcgrad,cagrad (ratios to the first)",
    )
    ap.add_argument(
        "--fused",
        action="store_true",
        help="time Adam fused (the default) and unfused side by side in 3 interleaved rounds",
    )
    ap.add_argument(
        "--stacked",
        action="store_true",
        help="time tasks' same-shaped encoders and heads run stacked (the default off the "
        "CPU) and one call per task, side by side in 3 interleaved rounds",
    )
    ap.add_argument(
        "--stacked-step",
        action="store_true",
        help="time SAC's stacked gradient step (the default for tasks of one shape) against "
        "the per-task step, side by side in 3 interleaved rounds",
    )
    ap.add_argument(
        "--graphed",
        action="store_true",
        help="time SAC's stacked step replayed as a CUDA graph (the default on a GPU) against "
        "it run eagerly, side by side in 3 interleaved rounds",
    )
    ap.add_argument(
        "--device-draw",
        action="store_true",
        help="time SAC's batches drawn on the device from a mirror of the replay "
        "(learner.sac.draw_on_device: true; the default on a GPU) against drawn on the host, "
        "side by side in 3 interleaved rounds",
    )
    args = ap.parse_args(argv)
    # The side-by-side comparisons (learner_compare.py) run this module's measure().
    from learner_compare import SETTINGS, SWITCHES, compare_gradients, compare_switch

    if args.gradients:
        return compare_gradients(args.config, args.updates, args.device, args.gradients, args)
    for name in (*SWITCHES, *SETTINGS):
        if getattr(args, name):
            return compare_switch(name, args.config, args.updates, args.device, args)
    result = {
        "benchmark": "learner_update",
        "machine": machine(),
        **measure(
            args.config,
            args.updates,
            args.device,
            args.profile,
            task_copies=args.task_copies,
            anatomy=True,
            box_spaces=args.box_spaces,
        ),
    }
    print(
        f"{result['config']}: {result['ms_per_update']:.1f} ms per update of "
        f"{result['samples_per_update']} samples ({result['updates_per_s']:.1f} updates/s alone)"
    )
    if "ms_per_gradient_step" in result:
        print(
            f"  {result['ms_per_gradient_step']:.1f} ms per gradient step: the learner keeps up "
            f"with {result['env_steps_per_s_bound']:.0f} env steps/s at this replay ratio; "
            f"drawing its batch {result['ms_per_draw']:.2f} ms ({result['draw_share']:.0%})"
        )
    if "host_syncs_per_gradient_step" in result:
        print(f"  host syncs per gradient step: {result['host_syncs_per_gradient_step']}")
    print(anatomy_line(result["anatomy"]))
    if "profile" in result:
        prof = result["profile"]
        print(prof["by_cpu"])
        if "by_device" in prof:
            print(prof["by_device"])
            print(f"device busy {prof['device_busy_fraction']:.0%} of the profiled updates' wall")
    path = write_result(
        f"learner_update_{args.config.stem}{copies_suffix(args.task_copies)}", result, args.out_dir
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
