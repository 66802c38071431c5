"""Where a GPU learner's replay should live: on the host, or on the device.

    python benchmarks/replay_device.py [--device cuda] [--seconds 2] [--out-dir DIR]
    # prints ms per drawn batch for each layout and place, writes replay_device.json

SAC draws a batch of transitions every gradient step. mtrl keeps each task's replay in host
memory (numpy rings, :mod:`mtrl.replay.storage`) and gathers the batch there, then copies it to
the learner's device (:func:`mtrl.algorithms.sac.batch.draw_groups`, the code a run uses).
Keeping the ring on the device instead would gather on the device and copy nothing, at the
cost of device memory. This measures, per drawn batch and with the device's queue finished:

- ``host``: the real path, ``draw_groups`` from host replays (uniform sampling);
- ``host_pinned``: the same gather into page-locked buffers and one non-blocking copy each
  (what a pinned staging area would buy the host path);
- ``device``: the same rings as torch tensors on the device, the same indices, gathered there.

for two layouts: **mt10** (10 tasks, 39-float observations, 4-float actions, 128 transitions
per task per draw: MT-SAC's batch) and **atari** (one task, 4x84x84 uint8 frames, 256 per
draw). Set beside a gradient step's time (``benchmarks/learner_update.py`` on a SAC config)
the host figure says what share of a step the host replay costs, and so what moving it to the
device could save at most.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_result

from mtrl.actors.unroll import UnrollBuffer
from mtrl.algorithms.sac.batch import draw_groups, group_key
from mtrl.replay import TaskReplay, TransitionStorage, UniformSampler

T, B = 20, 16
LAYOUTS: dict[str, dict[str, Any]] = {
    "mt10": {
        "tasks": 10,
        "obs": spaces.Box(-1.0, 1.0, (39,), np.float32),
        "action": spaces.Box(-1.0, 1.0, (4,), np.float32),
        "per_task": 128,
        "capacity": 200_000,
    },
    "atari": {
        "tasks": 1,
        "obs": spaces.Box(0, 255, (4, 84, 84), np.uint8),
        "action": spaces.Discrete(6),
        "per_task": 256,
        "capacity": 100_000,
    },
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ms_per_call(fn: Callable[[], Any], seconds: float, device: torch.device) -> float:
    """Milliseconds per ``fn()`` over ``seconds`` after 3 untimed calls, the device finished."""
    for _ in range(3):
        fn()
    _sync(device)
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    _sync(device)
    return (time.perf_counter() - t0) / calls * 1e3


def filled_replays(layout: dict[str, Any], seed: int = 0) -> list[TaskReplay]:
    """One full host replay per task, filled through ``add_unroll`` with random unrolls."""
    rng = np.random.default_rng(seed)
    obs_space, act_space = layout["obs"], layout["action"]
    replays = []
    for task in range(layout["tasks"]):
        store = TransitionStorage(task, obs_space, act_space, T, layout["capacity"])
        replay = TaskReplay(store, UniformSampler(store.capacity))
        buf = UnrollBuffer.allocate(task, T, B, obs_space, act_space)
        if obs_space.dtype == np.uint8:
            buf.obs[:] = rng.integers(0, 256, buf.obs.shape, np.uint8)
        else:
            buf.obs[:] = rng.standard_normal(buf.obs.shape)
        buf.rewards[:] = rng.standard_normal(buf.rewards.shape)
        buf.valid[:] = True
        for _ in range(-(-store.capacity // (T * B))):
            replay.add_unroll(buf)
        replays.append(replay)
    return replays


class PinnedGather:
    """The host path with page-locked staging: each field gathered straight into a pinned
    buffer (``np.take(..., out=)``) and copied with ``non_blocking=True``."""

    FIELDS = ("obs", "next_obs", "actions", "rewards", "terminated")

    def __init__(self, replays: list[TaskReplay], n: int, device: torch.device) -> None:
        self.replays, self.n, self.device = replays, n, device
        arrays = replays[0].storage.arrays
        shapes = {
            "obs": arrays["obs"].shape[2:],
            "next_obs": arrays["obs"].shape[2:],
            "actions": arrays["actions"].shape[2:],
            "rewards": (),
            "terminated": (),
        }
        dtypes = {"obs": "obs", "next_obs": "obs", "actions": "actions"}
        total = n * len(replays)
        self.staging = {}
        for f in self.FIELDS:
            buf = torch.from_numpy(np.zeros((total, *shapes[f]), arrays[dtypes.get(f, f)].dtype))
            self.staging[f] = buf.pin_memory() if device.type == "cuda" else buf

    def __call__(self, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        views = {f: s.numpy() for f, s in self.staging.items()}
        for k, replay in enumerate(self.replays):
            items, _ = replay.sampler.sample(self.n, rng)
            seg, t = np.divmod(items, T)
            a = replay.storage.arrays
            rows = slice(k * self.n, (k + 1) * self.n)
            views["obs"][rows] = a["obs"][seg, t]
            views["next_obs"][rows] = a["obs"][seg, t + 1]
            views["actions"][rows] = a["actions"][seg, t]
            views["rewards"][rows] = a["rewards"][seg, t]
            views["terminated"][rows] = a["terminated"][seg, t]
        return {f: s.to(self.device, non_blocking=True) for f, s in self.staging.items()}


class DeviceGather:
    """The same rings as torch tensors on ``device``, gathered there by the same indices."""

    def __init__(self, replays: list[TaskReplay], n: int, device: torch.device) -> None:
        self.replays, self.n, self.device = replays, n, device
        names = ("obs", "actions", "rewards", "terminated")
        self.rings = [
            {k: torch.as_tensor(r.storage.arrays[k]).to(device) for k in names} for r in replays
        ]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for ring in self.rings for t in ring.values())

    def __call__(self, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        parts: dict[str, list[torch.Tensor]] = {f: [] for f in PinnedGather.FIELDS}
        for replay, ring in zip(self.replays, self.rings, strict=True):
            items, _ = replay.sampler.sample(self.n, rng)
            idx = torch.as_tensor(items).to(self.device, non_blocking=True)
            seg, t = idx // T, idx % T
            parts["obs"].append(ring["obs"][seg, t])
            parts["next_obs"].append(ring["obs"][seg, t + 1])
            parts["actions"].append(ring["actions"][seg, t])
            parts["rewards"].append(ring["rewards"][seg, t])
            parts["terminated"].append(ring["terminated"][seg, t])
        return {f: torch.cat(p) for f, p in parts.items()}


def measure(name: str, device: torch.device, seconds: float) -> dict[str, Any]:
    layout = LAYOUTS[name]
    replays = filled_replays(layout)
    n = layout["per_task"]
    keys = [group_key(layout["action"])] * layout["tasks"]
    ready = list(range(layout["tasks"]))
    counts = [n] * layout["tasks"]
    rng = np.random.default_rng(1)
    host = ms_per_call(
        lambda: draw_groups(replays, keys, ready, counts, rng, device), seconds, device
    )
    pinned_gather = PinnedGather(replays, n, device)
    pinned = ms_per_call(lambda: pinned_gather(rng), seconds, device)
    on_device = DeviceGather(replays, n, device)
    dev = ms_per_call(lambda: on_device(rng), seconds, device)
    batch_bytes = sum(t.numel() * t.element_size() for t in on_device(rng).values())
    return {
        "tasks": layout["tasks"],
        "transitions_per_draw": n * layout["tasks"],
        "capacity_per_task": replays[0].storage.capacity,
        "batch_bytes": batch_bytes,
        "replay_bytes": on_device.nbytes,
        "ms_host": host,
        "ms_host_pinned": pinned,
        "ms_device": dev,
        "host_over_device": host / dev,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    torch.set_num_threads(1)
    result: dict[str, Any] = {"benchmark": "replay_device", "machine": machine(), "layouts": {}}
    result["device"] = str(device)
    for name in args.layouts:
        r = measure(name, device, args.seconds)
        result["layouts"][name] = r
        print(
            f"{name}: {r['transitions_per_draw']} transitions ({r['batch_bytes'] / 1e6:.2f} MB) "
            f"per draw — host {r['ms_host']:.3f} ms, host pinned {r['ms_host_pinned']:.3f} ms, "
            f"device {r['ms_device']:.3f} ms (host/device {r['host_over_device']:.1f}x); "
            f"replay {r['replay_bytes'] / 1e9:.2f} GB",
            flush=True,
        )
    print(f"wrote {write_result('replay_device', result, args.out_dir)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
