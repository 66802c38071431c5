"""What one learner step is made of, and how far it is from its arithmetic.

    anatomy(step, device) -> {"gflop", "matmul_floor_ms", "aten_ops", ...}

``step`` is a callable that takes one step (a SAC gradient step, an IMPALA update). Measured
in this process, on this machine:

* **FLOPs**: counted by ``torch.utils.flop_counter.FlopCounterMode`` over one step (matmuls and
  convolutions, forward and backward);
* **the arithmetic floor**: every matmul-like call the step makes (``mm``, ``addmm``, ``bmm``,
  ``baddbmm``, convolutions: recorded with their shapes and strides by a dispatch mode) timed
  alone, on fresh tensors of the same shapes, and summed — the time the step would take if it
  did nothing but its matrix arithmetic at the rate this machine reaches on those very shapes;
  ``ratio_to_floor`` is the step's time over it;
* **aten ops per step**: the operator calls a profiler sees (each costs its dispatch, whatever
  its size: the quantity a step in a few large calls cuts);
* on a GPU, **kernel launches per step** (the runtime's launch calls, a CUDA graph's replay
  counting one), **kernels per step** (what the device ran) and the **busy share** (the
  kernels' time per step, profiled, over the time per step, timed without the profiler, whose
  own start and stop would outweigh a few replayed graphs); and, to tell a step paced by the
  host from one paced by the device, the **host's part** (the time for the steps' calls to
  return, before waiting for the device) and the **device's span** (its first kernel's start to
  its last kernel's end) with the kernels' share of that span (below 1: the gaps between
  kernels).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["anatomy", "matmul_calls", "profiled", "sync", "time_calls"]

_MATMULS = {
    "aten.mm.default",
    "aten.addmm.default",
    "aten.bmm.default",
    "aten.baddbmm.default",
    "aten.convolution.default",
    "aten.convolution_backward.default",
}


class _Recorder(TorchDispatchMode):
    """Records the matmul-like calls (op, and each tensor argument's shape, stride, dtype)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, list[Any], dict[str, Any]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if str(func) in _MATMULS:
            self.calls.append((func, [_spec(a) for a in args], dict(kwargs)))
        return func(*args, **kwargs)


def _spec(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return ("tensor", tuple(a.shape), tuple(a.stride()), a.dtype, a.device)
    if isinstance(a, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in a):
        return type(a)(_spec(x) for x in a)
    return a


def _make(spec: Any) -> Any:
    if isinstance(spec, tuple) and spec and spec[0] == "tensor":
        _, shape, stride, dtype, device = spec
        return torch.empty_strided(shape, stride, dtype=dtype, device=device).normal_()
    if isinstance(spec, (list, tuple)):
        return type(spec)(_make(x) for x in spec)
    return spec


def matmul_calls(step: Callable[[], Any]) -> list[tuple[Any, list[Any], dict[str, Any]]]:
    """The matmul-like calls one ``step`` makes, with their argument specs."""
    rec = _Recorder()
    with rec:
        step()
    return rec.calls


def sync(device: torch.device) -> None:
    """Wait for ``device``'s queued work (a no-op off a GPU): what a clock reads after."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(calls: list[Any], device: torch.device, repeats: int = 20) -> float:
    """Seconds the calls take once each, timed alone on fresh tensors of their shapes
    (the median of ``repeats`` passes over all of them)."""
    ready = [(func, [_make(a) for a in args], kw) for func, args, kw in calls]
    with torch.no_grad():
        for func, args, kw in ready:  # warm-up
            func(*args, **kw)
        sync(device)
        passes = []
        for _ in range(repeats):
            start = time.perf_counter()
            for func, args, kw in ready:
                func(*args, **kw)
            sync(device)
            passes.append(time.perf_counter() - start)
    passes.sort()
    return passes[len(passes) // 2]


def profiled(step: Callable[[], Any], steps: int, device: torch.device) -> tuple[Any, float]:
    """``steps`` calls of ``step`` under ``torch.profiler`` (the GPU's activity too, on one):
    the profile and the calls' wall seconds, the device finished."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    sync(device)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        sync(device)
    return prof, time.perf_counter() - start


def _profile(step: Callable[[], Any], steps: int, device: torch.device) -> dict[str, float]:
    prof, _ = profiled(step, steps, device)
    events = prof.events()
    out = {"aten_ops": sum(1 for e in events if e.name.startswith("aten::")) / steps}
    if device.type == "cuda":
        launches = sum(
            1 for e in events if "LaunchKernel" in e.name or e.name.startswith("cudaGraphLaunch")
        )
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        busy_us = sum(e.device_time for e in kernels if "Memcpy" not in e.name)
        out["kernel_launches"] = launches / steps
        out["kernels"] = len(kernels) / steps
        out["busy_ms_per_step"] = busy_us / 1e3 / steps
        if kernels:  # the device's timeline: first kernel's start to last kernel's end
            span_us = max(e.time_range.end for e in kernels) - min(
                e.time_range.start for e in kernels
            )
            out["device_span_ms_per_step"] = span_us / 1e3 / steps
            out["busy_share_of_span"] = busy_us / span_us if span_us > 0 else float("nan")
    return out


def anatomy(step: Callable[[], Any], device: torch.device, steps: int = 10) -> dict[str, float]:
    """FLOPs, the arithmetic floor and the op counts of ``step`` (module docstring); takes
    ``2 + 2 × steps`` real steps. ``ms_per_step`` is timed over ``steps`` of them. A step
    replayed as a CUDA graph dispatches no op to count or time: its FLOPs read 0 and its floor
    NaN (the same step run eagerly has them)."""
    with FlopCounterMode(display=False) as counter:
        step()
    flops = counter.get_total_flops()  # 0 where a replayed CUDA graph dispatches nothing
    calls = matmul_calls(step)
    floor = time_calls(calls, device) if calls else float("nan")
    counts = _profile(step, steps, device)
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    queued = time.perf_counter()  # the host's part: on a GPU the steps may still be running
    sync(device)
    ms = (time.perf_counter() - start) / steps * 1e3
    if "busy_ms_per_step" in counts:  # over the steps' own time: the profiler's start and stop
        # take tens of ms, more than ten replayed graphs
        counts["device_busy_share"] = counts["busy_ms_per_step"] / ms
    return {
        "host_ms_per_step": (queued - start) / steps * 1e3,
        "gflop": flops / 1e9,
        "matmul_floor_ms": floor * 1e3,
        "matmul_gflops": flops / 1e9 / floor,
        "ms_per_step": ms,
        "ratio_to_floor": ms / (floor * 1e3),
        **counts,
    }
