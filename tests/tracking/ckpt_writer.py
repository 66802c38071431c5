"""Child process of the kill test: writes checkpoints in a loop until it is killed.

Usage: ``python ckpt_writer.py RUN_DIR INTERVAL NUMEL``. Resumes from the newest loadable
checkpoint, prints ``ready`` and then each step right after its checkpoint is durable.
"""

from __future__ import annotations

import sys

import torch

from mtrl.checkpoint import CheckpointError, load_latest, save_checkpoint


def main() -> None:
    run_dir, interval, numel = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    try:
        state, _ = load_latest(run_dir)
        step = int(state["step"])
    except CheckpointError:
        step = 0
    print("ready", flush=True)
    while True:
        step += interval
        state = {"step": step, "data": torch.full((numel,), float(step)), "meta": {"n": [step]}}
        save_checkpoint(run_dir, state, step, keep_last=3)
        print(step, flush=True)


if __name__ == "__main__":
    main()
