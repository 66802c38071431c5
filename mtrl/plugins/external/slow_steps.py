"""A warning for simulation steps that approach their timeout."""

from __future__ import annotations

import math
import sys
import time


class SlowSteps:
    """Warns (on stderr, at most once a minute) when steps take over half the step timeout:
    a slow code is then seen long before a step is counted as a hang."""

    def __init__(self, name: str, timeout_s: float, every_s: float = 60.0) -> None:
        self.name, self.timeout_s, self.every_s = name, timeout_s, every_s
        self.count, self.worst, self.said = 0, 0.0, -math.inf

    def observe(self, seconds: float) -> None:
        if seconds <= self.timeout_s / 2:
            return
        self.count += 1
        self.worst = max(self.worst, seconds)
        now = time.monotonic()
        if now - self.said < self.every_s:
            return
        print(
            f"warning: {self.name}: {self.count} step(s) took over half the step timeout "
            f"(slowest {self.worst:.1f}s of step_timeout_s={self.timeout_s:g}); a step past "
            "it counts as a hang: raise the env's step_timeout_s (env_kwargs) if the code is "
            "this slow",
            file=sys.stderr,
            flush=True,
        )
        self.said, self.count, self.worst = now, 0, 0.0
