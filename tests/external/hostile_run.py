"""Train the config of a YAML file beside a hostile simulation and print ``RESULT {...}``.

Run by ``test_hostile_peer_run.py`` in a process of its own, with the test's ``hostile`` plugin
on PYTHONPATH: the forkserver the actors fork from loads the plugins when it starts, so one
started earlier in the pytest process would not know that plugin.

Task 0 of the config is the healthy one; every other task is hostile. The run ends on a
condition, not on a step budget that races the simulations' start-up: ``total_env_steps`` is
only a ceiling, and :class:`Watched` stops the run once every hostile task has settled
(quarantined, or restarted ``--restarts`` times) and the healthy task has made ``--grow`` more
env steps since then, or after ``--deadline-s``. The result holds every task's fault record
(``trainer.pool.faults``), env steps and final greedy return, and the healthy task's env steps
when the first fault of a hostile task was counted and when the last one settled.

Usage: ``hostile_run.py CONFIG.yaml [--restarts 3] [--grow 5000] [--deadline-s 240]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from mtrl.actors.protocol import UnrollInfo
from mtrl.config import parse_config
from mtrl.train.trainer import Trainer

HEALTHY = 0  # the healthy task's index in the config; the others are hostile


class Watched(Trainer):
    """A trainer that notes the healthy task's env steps at the first fault of a hostile task
    and when all had settled, and stops ``grow`` env steps after that (or at ``deadline``)."""

    def __init__(self, cfg: Any, restarts: int, grow: int, deadline_s: float, **kw: Any) -> None:
        super().__init__(cfg, **kw)
        self.restarts, self.grow = restarts, grow
        self.deadline = time.monotonic() + deadline_s
        self.at_first_fault: int | None = None
        self.at_settled: int | None = None

    def on_unroll(self, task: int, info: UnrollInfo) -> None:
        hostile = self.pool.faults[HEALTHY + 1 :]
        steps = self.progress[HEALTHY].env_steps
        if self.at_first_fault is None and any(f.faults for f in hostile):
            self.at_first_fault = steps
        settled = all(f.quarantined or f.restarts >= self.restarts for f in hostile)
        if self.at_settled is None and settled:
            self.at_settled = steps
        grown = self.at_settled is not None and steps >= self.at_settled + self.grow
        if grown or time.monotonic() > self.deadline:
            self.request_stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config", type=Path)
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--grow", type=int, default=5000)
    ap.add_argument("--deadline-s", type=float, default=240.0)
    args = ap.parse_args()
    cfg = parse_config(args.config.read_text())
    trainer = Watched(cfg, args.restarts, args.grow, args.deadline_s, console=False)
    try:
        result = trainer.run()
        faults = [dataclasses.asdict(f) for f in trainer.pool.faults]
    finally:
        trainer.close()
    for f in faults:
        f.pop("_buckets", None)
        f.pop("_sums", None)
    out = {
        "faults": faults,
        "env_steps": {t.name: t.env_steps for t in result.tasks},
        "greedy_eval": {t.name: t.greedy_eval for t in result.tasks},
        "at_first_fault": trainer.at_first_fault,
        "at_settled": trainer.at_settled,
        "run_dir": str(result.run_dir),
    }
    print("RESULT " + json.dumps(out, default=str), flush=True)


if __name__ == "__main__":
    sys.exit(main())
