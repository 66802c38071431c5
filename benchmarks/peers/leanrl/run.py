"""Runs LeanRL's SAC script unmodified and prints its measured speed as one JSON line.

The script logs its speed (env steps per second since ``learning_starts`` plus a few burn-in
steps, one gradient step per env step) through ``wandb.log`` every 100 steps; here ``wandb``'s
``init`` and ``log`` are replaced before the script runs so nothing is sent anywhere and the
last logged speed is kept. Arguments after ``--`` are the script's own (tyro), e.g.
``-- --env-id HalfCheetah-v4 --no-cuda --compile --total-timesteps 8000``.
"""

from __future__ import annotations

import json
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import torch
import wandb

SCRIPT = Path(__file__).resolve().parent / "sac_continuous_action_torchcompile.py"


def main() -> None:
    logged: list[dict[str, Any]] = []
    wandb.init = lambda *a, **k: None  # type: ignore[assignment]
    wandb.log = lambda data, step=None, **k: logged.append({"step": step, **data})  # type: ignore[assignment]
    torch.set_num_threads(1)
    argv = sys.argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    sys.argv = [str(SCRIPT), *argv]
    start = time.perf_counter()
    runpy.run_path(str(SCRIPT), run_name="__main__")
    last = logged[-1] if logged else {}
    print(
        json.dumps(
            {
                "env_steps_per_s": float(last.get("speed", float("nan"))),
                "episode_return": float(last.get("episode_return", float("nan"))),
                "last_step": last.get("step"),
                "wall_s": time.perf_counter() - start,
                "torch": torch.__version__,
                "threads": torch.get_num_threads(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
