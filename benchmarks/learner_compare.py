"""Side-by-side comparisons of the learner's update (``benchmarks/learner_update.py``'s
``--gradients``, ``--fused``, ``--stacked``, ``--stacked-step``, ``--graphed`` and
``--device-draw``): each arm measured by :func:`learner_update.measure` in interleaved rounds
in one process, the median of each printed with its ratio and written as JSON."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from _common import machine, write_result
from learner_update import anatomy_line, copies_suffix, measure

from mtrl.algorithms.sac import graphed, stacked_step
from mtrl.config import load_config
from mtrl.learner import optim, stacked
from mtrl.learner.device import resolve_device

__all__ = ["SETTINGS", "SWITCHES", "compare_gradients", "compare_switch"]


def compare_gradients(
    config: Path, updates: int, device: str | None, names: str, args: argparse.Namespace
) -> int:
    """Each gradient combination's ms per update, in interleaved rounds (the median of 3),
    and its ratio to the first's."""
    kinds = [k.strip() for k in names.split(",") if k.strip()]
    runs: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(3):
        for kind in kinds:
            runs[kind].append(measure(config, updates, device, gradients=kind)["ms_per_update"])
    median = {k: float(np.median(v)) for k, v in runs.items()}
    base = median[kinds[0]]
    for kind in kinds:
        print(
            f"{kind:>8}: {median[kind]:.1f} ms per update (rounds "
            f"{', '.join(f'{x:.1f}' for x in runs[kind])}), {median[kind] / base:.2f}x {kinds[0]}"
        )
    result = {
        "benchmark": "learner_update_gradients",
        "machine": machine(),
        "config": str(config),
        "updates": updates,
        "ms_per_update": runs,
        "median_ms": median,
        "ratio_to_first": {k: median[k] / base for k in kinds},
    }
    path = write_result(f"learner_update_gradients_{config.stem}", result, args.out_dir)
    print(f"wrote {path}")
    return 0


SWITCHES = {  # --NAME: the module flag it turns off, and what the off arm is called
    "fused": (optim, "FUSED_ADAM", "unfused"),
    "stacked": (stacked, "STACKED", "per-task"),
    "stacked_step": (stacked_step, "ENABLED", "per-task-step"),
    "graphed": (graphed, "GRAPHED", "eager"),
}

SETTINGS = {  # --NAME: the learner.sac field it sets true in one arm, false in the other
    "device_draw": ("draw_on_device", "host-draw"),
}


def compare_switch(
    name: str, config: Path, updates: int, device: str | None, args: argparse.Namespace
) -> int:
    """ms per update (and per gradient step, for a replay rule) with a switch of
    :data:`SWITCHES` (a module flag) or :data:`SETTINGS` (a ``learner.sac`` field) on and off,
    in interleaved rounds (the median of 3)."""
    if name in SETTINGS:
        field, off = SETTINGS[name]
        module, flag = None, ""
    else:
        module, flag, off = SWITCHES[name]
        field = ""
    arms = {name: True, off: False}
    default = getattr(module, flag) if module is not None else None
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    try:
        for round_ in range(3):
            for arm, on in arms.items():
                if module is not None:
                    setattr(module, flag, on)
                first = round_ == 0  # each arm's anatomy once
                run = measure(
                    config,
                    updates,
                    device,
                    task_copies=args.task_copies,
                    anatomy=first,
                    box_spaces=args.box_spaces,
                    sac_settings={field: on} if field else None,
                )
                runs[arm].append(run)
                unit = "ms_per_gradient_step" if "ms_per_gradient_step" in run else "ms_per_update"
                # each reading as it comes: a time-boxed run cut short still leaves some
                print(f"round {round_ + 1}, {arm}: {run[unit]:.2f} {unit.replace('_', ' ')}")
                if first:
                    print(anatomy_line(run["anatomy"]))
    finally:
        if module is not None:
            setattr(module, flag, default)
    ms = {arm: [r[unit] for r in rs] for arm, rs in runs.items()}
    median = {arm: float(np.median(v)) for arm, v in ms.items()}
    for arm, values in ms.items():
        rounds = ", ".join(f"{x:.2f}" for x in values)
        print(f"{arm:>9}: {median[arm]:.2f} {unit.replace('_', ' ')} (rounds {rounds})")
    print(f"{off} / {name}: {median[off] / median[name]:.2f}x")
    result = {
        "benchmark": f"learner_update_{name}",
        "machine": machine(),
        "config": str(config),
        "device": str(resolve_device(device or load_config(config).learner.device)),
        "updates": updates,
        "unit": unit,
        unit: ms,
        "median_ms": median,
        "anatomy": {arm: rs[0]["anatomy"] for arm, rs in runs.items()},
        f"{off}_over_{name}".replace("-", "_"): median[off] / median[name],
    }
    suffix = copies_suffix(args.task_copies)
    path = write_result(f"learner_update_{name}_{config.stem}{suffix}", result, args.out_dir)
    print(f"wrote {path}")
    return 0
