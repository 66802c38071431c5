"""Replay throughput: unroll inserts per second and prioritized samples per second.

    .venv/bin/python benchmarks/replay_throughput.py [--seconds 3] [--capacity 1000000]
        [--torchrl-python /tmp/venv-torchrl/bin/python]
    # prints the figures, writes docs/results/replay_throughput.json

**Inserts**: whole unrolls of 20 steps x 16 env copies (320 transitions) added to one task's
:class:`~mtrl.replay.TaskReplay` (transition storage + prioritized sampler, so each insert
also writes 320 new priorities into the sum-tree), for a 4-float observation and an
84x84x4 uint8 one (Atari frames), in transitions per second.

**Samples**: after filling a replay of ``--capacity`` transitions (4-float observations),
prioritized draws of batch 256 with the batch gathered from the storage, alone and followed
by the priority update a learner makes, in transitions per second.

**TorchRL side by side** (``--torchrl-python``): the same operations on TorchRL's
``TensorDictReplayBuffer`` with a ``LazyTensorStorage`` and its ``PrioritizedSampler`` (C++
segment trees), in the conventional transition layout (``observation`` and
``("next", "observation")`` both stored), run by that interpreter in a subprocess so torchrl
never enters mtrl's environment. Both sides run on one thread (``torch.set_num_threads(1)``).
TorchRL's wheel carries its segment trees as a C++ extension built against one torch
release; if ``import torchrl._torchrl`` fails with an undefined symbol, rebuild that extension
from TorchRL's ``torchrl/csrc`` (``pybind.cpp``, ``utils.cpp``) with
``torch.utils.cpp_extension.load`` in that environment and put it in place of the wheel's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

T, B, BATCH = 20, 16, 256
ALPHA, BETA = 0.6, 0.4
OBS_KINDS = {"vector4": ((4,), "float32"), "atari84x84x4": ((84, 84, 4), "uint8")}


def rate(step: Callable[[], int], seconds: float, warmup: int = 3) -> float:
    """Items per second of ``step`` (which returns the items it handled), over ``seconds``
    after ``warmup`` untimed calls (inserts fill the ring once first: the first write to a
    fresh page costs a page fault on either side, which is allocation, not insertion)."""
    for _ in range(warmup):
        step()
    done, t0 = 0, time.perf_counter()
    while True:
        done += step()
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return done / elapsed


# --- mtrl ---------------------------------------------------------------------------------


def _mtrl_replay(shape: tuple[int, ...], dtype: str, capacity: int) -> tuple[Any, list[Any]]:
    """A task replay with a prioritized sampler, and 4 random unrolls to feed it."""
    from gymnasium import spaces

    from mtrl.actors.unroll import UnrollBuffer
    from mtrl.replay import PrioritizedSampler, TaskReplay, TransitionStorage

    lo, hi = (0, 255) if dtype == "uint8" else (-1, 1)
    obs_space = spaces.Box(lo, hi, shape, np.dtype(dtype))
    act_space = spaces.Discrete(6)
    store = TransitionStorage(0, obs_space, act_space, T, capacity)
    replay = TaskReplay(store, PrioritizedSampler(store.capacity, ALPHA, BETA))
    rng = np.random.default_rng(0)
    unrolls = []
    for _ in range(4):
        buf = UnrollBuffer.allocate(0, T, B, obs_space, act_space)
        if dtype == "uint8":
            buf.obs[:] = rng.integers(0, 256, buf.obs.shape, np.uint8)
        else:
            buf.obs[:] = rng.standard_normal(buf.obs.shape)
        buf.actions[:] = rng.integers(0, 6, buf.actions.shape)
        buf.rewards[:] = rng.standard_normal(buf.rewards.shape)
        buf.valid[:] = rng.random(buf.valid.shape) > 0.01
        unrolls.append(buf)
    return replay, unrolls


def mtrl_figures(seconds: float, capacity: int, pixel_capacity: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    out: dict[str, Any] = {}
    for kind, (shape, dtype) in OBS_KINDS.items():
        cap = pixel_capacity if dtype == "uint8" else capacity
        replay, unrolls = _mtrl_replay(shape, dtype, cap)
        k = iter(range(1 << 62))

        def insert(replay: Any = replay, unrolls: list = unrolls, k: Any = k) -> int:
            replay.add_unroll(unrolls[next(k) % len(unrolls)])
            return T * B

        fill = -(-replay.storage.capacity // (T * B))  # every page touched before timing
        out[f"insert_{kind}_transitions_per_s"] = rate(insert, seconds, warmup=fill)
        out[f"insert_{kind}_capacity"] = replay.storage.capacity
    replay, unrolls = _mtrl_replay(*OBS_KINDS["vector4"], capacity)
    for i in range(-(-replay.storage.capacity // (T * B))):
        replay.add_unroll(unrolls[i % len(unrolls)])
    rng = np.random.default_rng(1)

    def sample() -> int:
        replay.sample(BATCH, rng)
        return BATCH

    def sample_update() -> int:
        _, idx, _ = replay.sample(BATCH, rng)
        replay.update_priorities(idx, rng.standard_normal(BATCH))
        return BATCH

    out["sample_transitions_per_s"] = rate(sample, seconds)
    out["sample_update_transitions_per_s"] = rate(sample_update, seconds)
    out["sample_capacity"] = replay.storage.capacity
    out["storage_bytes_vector4_1M"] = replay.storage.allocated_nbytes
    return out


# --- TorchRL (runs in the other interpreter; imports nothing of mtrl) ----------------------


def _torchrl_buffer(shape: tuple[int, ...], dtype: str, capacity: int) -> tuple[Any, list[Any]]:
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.data.replay_buffers.samplers import PrioritizedSampler

    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(capacity),
        sampler=PrioritizedSampler(capacity, alpha=ALPHA, beta=BETA),
        batch_size=BATCH,
    )
    g = torch.Generator().manual_seed(0)
    n = T * B

    def obs() -> torch.Tensor:
        if dtype == "uint8":
            return torch.randint(0, 256, (n, *shape), generator=g, dtype=torch.uint8)
        return torch.randn(n, *shape, generator=g)

    flags = {k: torch.zeros(n, 1, dtype=torch.bool) for k in ("done", "terminated", "truncated")}
    blocks = [
        TensorDict(
            {
                "observation": obs(),
                "action": torch.randint(0, 6, (n,), generator=g),
                "sample_log_prob": torch.randn(n, generator=g),
                "next": {"observation": obs(), "reward": torch.randn(n, 1, generator=g), **flags},
            },
            batch_size=[n],
        )
        for _ in range(4)
    ]
    return rb, blocks


def torchrl_figures(seconds: float, capacity: int, pixel_capacity: int) -> dict[str, Any]:
    import torchrl

    torch.set_num_threads(1)
    out: dict[str, Any] = {"torchrl": torchrl.__version__, "torch": torch.__version__}
    for kind, (shape, dtype) in OBS_KINDS.items():
        cap = pixel_capacity if dtype == "uint8" else capacity
        rb, blocks = _torchrl_buffer(shape, dtype, cap)
        k = iter(range(1 << 62))

        def insert(rb: Any = rb, blocks: list = blocks, k: Any = k) -> int:
            rb.extend(blocks[next(k) % len(blocks)])
            return T * B

        out[f"insert_{kind}_transitions_per_s"] = rate(insert, seconds, warmup=-(-cap // (T * B)))
    rb, blocks = _torchrl_buffer(*OBS_KINDS["vector4"], capacity)
    for i in range(-(-capacity // (T * B))):
        rb.extend(blocks[i % len(blocks)])
    g = torch.Generator().manual_seed(1)

    def sample() -> int:
        rb.sample()
        return BATCH

    def sample_update() -> int:
        td = rb.sample()
        rb.update_priority(td["index"], torch.randn(BATCH, generator=g).abs())
        return BATCH

    out["sample_transitions_per_s"] = rate(sample, seconds)
    out["sample_update_transitions_per_s"] = rate(sample_update, seconds)
    return out


def run_torchrl(python: str, seconds: float, capacity: int, pixel_capacity: int) -> dict:
    """The TorchRL figures from ``python`` (a venv with torchrl), or why there are none."""
    cmd = [python, __file__, "--torchrl-worker", "--seconds", str(seconds)]
    cmd += ["--capacity", str(capacity), "--pixel-capacity", str(pixel_capacity)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"skipped": f"{python} failed: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(name: str, figures: dict[str, Any]) -> None:
    for key, value in figures.items():
        if key.endswith("_per_s"):
            print(f"{name:>7} {key:<42} {value:>14,.0f}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    p.add_argument("--capacity", type=int, default=1_000_000, help="transitions (4-float obs)")
    p.add_argument("--pixel-capacity", type=int, default=20_000, help="transitions (84x84x4)")
    p.add_argument("--torchrl-python", help="an interpreter with torchrl, for the comparison")
    p.add_argument("--torchrl-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=None, help="results directory")
    args = p.parse_args(argv)
    sizes = (args.seconds, args.capacity, args.pixel_capacity)
    if args.torchrl_worker:
        result = torchrl_figures(*sizes)
        print(json.dumps(result))
        return result
    payload: dict[str, Any] = {
        "machine": machine(),
        "settings": {
            "unroll": [T, B],
            "batch": BATCH,
            "alpha": ALPHA,
            "beta": BETA,
            "seconds": args.seconds,
            "capacity": args.capacity,
            "pixel_capacity": args.pixel_capacity,
            "threads": 1,
        },
        "mtrl": mtrl_figures(*sizes),
    }
    report("mtrl", payload["mtrl"])
    if args.torchrl_python:
        payload["torchrl"] = run_torchrl(args.torchrl_python, *sizes)
        report("torchrl", payload["torchrl"])
    path = write_result("replay_throughput", payload, args.out)
    print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
