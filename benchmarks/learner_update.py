"""How fast the learner's update runs alone on a config's batch shape: updates per second.

    .venv/bin/python benchmarks/learner_update.py [configs/quickstart.yaml] [--updates 50]
    # prints ms per update, writes docs/results/learner_update_<config name>.json

Each task gets one block of ``num_envs`` columns × ``unroll_length`` steps per update (the
smallest batch a run's learner takes when every task's actor delivers one unroll), filled
with observations and actions sampled from the task's spaces; the model and learner are the
config's, on one torch thread (``learner.torch_threads``). Set beside a run's updates per
second (``charts/updates`` over ``charts/elapsed_s``) it tells whether that run waits on its
learner or on its data (docs/BENCHMARKS.md, "What bounds breakout in the quickstart").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.config import load_config
from mtrl.learner.batch import TaskBatch
from mtrl.learner.impala import ImpalaLearner
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


def measure(config: Path, updates: int) -> dict[str, Any]:
    """Milliseconds per update (after 5 warm-up updates) on the config's smallest batch."""
    cfg = load_config(config)
    plugins = get_plugins()
    spaces = []
    for t in cfg.tasks:
        spec = plugins.envs.get(t.env)
        spaces.append(TaskSpaces(spec.observation_space, spec.action_space))
    torch.set_num_threads(cfg.learner.torch_threads)
    torch.manual_seed(cfg.seed)
    learner = ImpalaLearner(
        MultiTaskModel(spaces, cfg.learner.model),
        cfg.learner,
        [t.key for t in cfg.tasks],
        [t.learning_rate_scale for t in cfg.tasks],  # the optimiser's groups, as in a run
    )
    steps = cfg.learner.unroll_length
    batches = [
        task_block(i, s, steps, t.num_envs, i)
        for i, (s, t) in enumerate(zip(spaces, cfg.tasks, strict=True))
    ]
    for _ in range(5):
        learner.update(batches)
    start = time.perf_counter()
    for _ in range(updates):
        learner.update(batches)
    ms = (time.perf_counter() - start) / updates * 1e3
    return {
        "config": str(config),
        "tasks": [t.key for t in cfg.tasks],
        "samples_per_update": steps * sum(t.num_envs for t in cfg.tasks),
        "updates": updates,
        "ms_per_update": ms,
        "updates_per_s": 1e3 / ms,
        "torch_threads": cfg.learner.torch_threads,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", type=Path, nargs="?", default=ROOT / "configs" / "quickstart.yaml")
    ap.add_argument("--updates", type=int, default=50)
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    result = {
        "benchmark": "learner_update",
        "machine": machine(),
        **measure(args.config, args.updates),
    }
    print(
        f"{result['config']}: {result['ms_per_update']:.1f} ms per update of "
        f"{result['samples_per_update']} samples ({result['updates_per_s']:.1f} updates/s alone)"
    )
    path = write_result(f"learner_update_{args.config.stem}", result, args.out_dir)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
