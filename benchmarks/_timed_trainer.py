"""A trainer that stops a fixed time after its first unroll (actor start-up excluded), for the
benchmarks that time a run."""

from __future__ import annotations

import time
from typing import Any

from mtrl.actors.protocol import UnrollInfo
from mtrl.train.trainer import Trainer


class TimedTrainer(Trainer):
    """Stops ``seconds`` after its first unroll (actor start-up excluded)."""

    def __init__(self, cfg: Any, seconds: float, **kw: Any) -> None:
        super().__init__(cfg, **kw)
        self.seconds = seconds
        self.deadline: float | None = None

    def on_unroll(self, task: int, info: UnrollInfo) -> None:
        now = time.perf_counter()
        if self.deadline is None:
            self.deadline = now + self.seconds
        elif now > self.deadline:
            self.request_stop()
