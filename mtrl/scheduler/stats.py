"""Robust streaming statistics that turn raw actor observations into :class:`TaskRecord`\\ s.

Step times in RL are heavy-tailed (stochastic simulators, stragglers, GC pauses, a hung env
that is restarted), so nothing here is a plain mean over a plain history:

* throughput is a **median of means** over a window of recent unrolls: the window is cut into
  blocks, each block's rate is total steps over total seconds (unbiased for the long-run rate),
  and the median of the block rates ignores a block spoiled by one outlier (Nemirovsky & Yudin
  1983; Lugosi & Mendelson 2019 for heavy-tailed means). The price is a small bias when the
  tail has infinite variance: for Pareto α = 1.5 stragglers it reads ~8% fast over 200
  unrolls and ~4% over 1,000, hence 3 blocks and a 500-unroll window by default;
* crashes are rare but systematic, so a median would hide them: their cost enters separately,
  as the failure probability per unroll attempt over a longer window times the mean seconds
  lost per failure (bounded by the step timeout and restart delay, so a plain mean is safe);
* jitter is the interquartile range over the median of recent step times;
* learning progress is the **Theil–Sen** slope (median of pairwise slopes, Sen 1968) of
  means of consecutive blocks of episode scores against the task's env steps; block means
  damp episode noise and the median of slopes tolerates ~29% outlying blocks;
* a **warm-up** period after a task's first observation is ignored (imports, first resets,
  JIT compilation), and a task is only *warm* once enough post-warm-up unrolls arrived.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from mtrl.scheduler.records import TaskRecord


def median_of_means(steps: Sequence[float], seconds: Sequence[float], blocks: int = 3) -> float:
    """Robust steps-per-second: median over contiguous blocks of ``sum(steps) / sum(seconds)``.

    With one block this is the plain ratio estimator; with ``b`` blocks an outlier can spoil at
    most one block's rate, and the median ignores up to ``(b - 1) // 2`` spoiled blocks.
    """
    n = np.asarray(steps, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if n.shape != t.shape or n.ndim != 1 or len(n) == 0:
        raise ValueError("steps and seconds must be equal-length non-empty 1-D sequences")
    b = max(1, min(blocks, len(n)))
    bounds = np.linspace(0, len(n), b + 1).astype(int)
    sn = np.add.reduceat(n, bounds[:-1])
    st = np.add.reduceat(t, bounds[:-1])
    return float(np.median(sn / np.maximum(st, 1e-12)))


def relative_iqr(samples: Sequence[float]) -> float:
    """Interquartile range over median: a scale-free, outlier-proof measure of jitter."""
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("relative_iqr needs at least one sample")
    q25, q50, q75 = np.quantile(x, [0.25, 0.5, 0.75])
    return float((q75 - q25) / q50) if q50 > 0 else 0.0


def theil_sen_slope(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Median of the slopes of all point pairs with distinct ``x``; ``None`` if there are none."""
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError("x and y must be equal-length 1-D sequences")
    i, j = np.triu_indices(len(xs), k=1)
    dx = xs[j] - xs[i]
    keep = dx != 0
    if not keep.any():
        return None
    return float(np.median((ys[j] - ys[i])[keep] / dx[keep]))


def effective_rate(
    stepping_rate: float, steps_per_unroll: float, failure_prob: float, lost_s: float
) -> float:
    """Steps per second of an actor that crashes on a ``failure_prob`` share of its unroll
    attempts and loses ``lost_s`` seconds each time (crashed work plus restart).

    Per attempt it delivers ``(1 - p) n`` steps in ``(1 - p) n / r + p * lost_s`` seconds.
    """
    if not 0.0 <= failure_prob < 1.0:
        raise ValueError(f"failure_prob must be in [0, 1), got {failure_prob}")
    good = (1.0 - failure_prob) * steps_per_unroll
    return good / (good / stepping_rate + failure_prob * lost_s)


class TaskStats:
    """Accumulates one task's observations and summarises them as a :class:`TaskRecord`.

    Not thread-safe: feed it from the one thread that runs the scheduler loop.
    """

    def __init__(
        self,
        name: str,
        weight: float = 1.0,
        *,
        target: float | None = None,
        window: int = 500,
        blocks: int = 3,
        warmup_s: float = 10.0,
        min_unrolls: int = 5,
        score_window: int = 20,
        progress_window: int = 500,
        min_progress_points: int = 3,
        failure_window: int = 1000,
        max_failures: int | None = None,
    ) -> None:
        if min(window, blocks, min_unrolls, score_window, failure_window) < 1:
            raise ValueError("windows, blocks and min_unrolls must be >= 1")
        if min_progress_points < 2 or progress_window < min_progress_points * score_window:
            raise ValueError(
                "progress_window must hold at least min_progress_points (>= 2) blocks of "
                f"score_window episodes, got {progress_window} < {min_progress_points} x "
                f"{score_window}"
            )
        if warmup_s < 0:
            raise ValueError(f"warmup_s must be >= 0, got {warmup_s}")
        self.name, self.weight, self.target = name, weight, target
        self.blocks, self.warmup_s, self.min_unrolls = blocks, warmup_s, min_unrolls
        self.score_window, self.min_progress_points = score_window, min_progress_points
        self.max_failures = max_failures
        self._unroll_steps: deque[float] = deque(maxlen=window)
        self._unroll_seconds: deque[float] = deque(maxlen=window)
        self._step_times: deque[float] = deque(maxlen=window)
        self._attempt_failed: deque[bool] = deque(maxlen=failure_window)
        self._lost_s: deque[float] = deque(maxlen=failure_window)
        self._scores: deque[float] = deque(maxlen=score_window)
        self._block: list[float] = [0.0, 0.0, 0.0]  # episodes, sum of x, sum of scores
        self._curve: deque[tuple[float, float]] = deque(maxlen=progress_window // score_window)
        self._first_seen: float | None = None
        self._last_seen: float | None = None
        self.env_steps = 0
        """Env steps generated by this task's actors (warm-up included)."""
        self.delivered = 0
        """Env steps of this task the learner consumed."""
        self.failures = 0
        """Actor failures on this task."""
        self.quarantined = False
        self.members: int | None = None
        """Members present in the task's batch envs (where attached codes join and leave)."""
        """Set by :meth:`quarantine` or after more than ``max_failures`` failures."""

    def _seen(self, now: float | None) -> float:
        now = time.monotonic() if now is None else now
        if self._first_seen is None:
            self._first_seen = now
        self._last_seen = now
        return now

    def _warming(self, now: float) -> bool:
        assert self._first_seen is not None
        return now < self._first_seen + self.warmup_s

    def observe_unroll(self, env_steps: int, elapsed_s: float, *, now: float | None = None) -> None:
        """One actor handed over an unroll of ``env_steps`` env steps (all copies) that took
        ``elapsed_s`` wall seconds from its first step to the hand-over: inference waits and
        waits for learner-queue space in, env construction out."""
        if env_steps < 0 or not (elapsed_s > 0 and math.isfinite(elapsed_s)):
            raise ValueError(f"{self.name}: bad unroll ({env_steps} steps in {elapsed_s} s)")
        now = self._seen(now)
        self.env_steps += env_steps
        self._attempt_failed.append(False)
        if not self._warming(now):
            self._unroll_steps.append(float(env_steps))
            self._unroll_seconds.append(float(elapsed_s))

    def observe_step_times(self, seconds: Iterable[float], *, now: float | None = None) -> None:
        """Per-step wall times (seconds per batch step), for the jitter estimate."""
        now = self._seen(now)
        if not self._warming(now):
            self._step_times.extend(float(s) for s in seconds)

    def observe_delivered(self, env_steps: int) -> None:
        """The learner consumed ``env_steps`` env steps of this task."""
        if env_steps < 0:
            raise ValueError(f"{self.name}: delivered steps must be >= 0, got {env_steps}")
        self.delivered += env_steps

    def observe_episode(self, score: float) -> None:
        """An episode ended with ``score`` (normalised when possible), at the current env steps."""
        if not math.isfinite(score):
            return  # a NaN return is the env's bug, reported elsewhere; keep the stats clean
        self._scores.append(float(score))
        block = self._block
        block[0] += 1
        block[1] += self.env_steps / 1e6
        block[2] += score
        if block[0] >= self.score_window:
            self._curve.append((block[1] / block[0], block[2] / block[0]))
            self._block = [0.0, 0.0, 0.0]

    def observe_failure(self, lost_s: float = 0.0) -> None:
        """An actor of this task crashed or hung, idling ``lost_s`` seconds (the crashed part of
        its unroll plus the restart); quarantines after ``max_failures``."""
        if lost_s < 0 or not math.isfinite(lost_s):
            raise ValueError(f"{self.name}: lost_s must be finite and >= 0, got {lost_s}")
        self.failures += 1
        self._attempt_failed.append(True)
        self._lost_s.append(float(lost_s))
        if self.max_failures is not None and self.failures > self.max_failures:
            self.quarantined = True

    def quarantine(self) -> None:
        """Take the task out of the allocation for the rest of the run."""
        self.quarantined = True

    def warm(self, now: float | None = None) -> bool:
        """Past warm-up with at least ``min_unrolls`` unrolls observed after it."""
        if self._first_seen is None:
            return False
        now = (self._last_seen or 0.0) if now is None else now
        return not self._warming(now) and len(self._unroll_steps) >= self.min_unrolls

    def failure_prob(self) -> float:
        """Share of recent unroll attempts that crashed."""
        n = len(self._attempt_failed)
        return sum(self._attempt_failed) / n if n else 0.0

    def steps_per_s(self) -> float | None:
        """Robust env steps per second of one actor, crash downtime included, or ``None``
        before any post-warm-up data."""
        if not self._unroll_steps:
            return None
        rate = median_of_means(self._unroll_steps, self._unroll_seconds, self.blocks)
        p = self.failure_prob()
        if p == 0 or not self._lost_s:
            return rate
        steps = float(np.mean(self._unroll_steps))
        return effective_rate(rate, steps, min(p, 0.99), float(np.mean(self._lost_s)))

    def step_time_spread(self) -> float | None:
        """Relative IQR of recent step times, or ``None`` without samples."""
        return relative_iqr(self._step_times) if self._step_times else None

    def score(self) -> float | None:
        """Mean of the last ``score_window`` episode scores."""
        return float(np.mean(self._scores)) if self._scores else None

    def progress(self) -> float | None:
        """Theil–Sen slope of recent score-block means per million env steps of this task."""
        if len(self._curve) < self.min_progress_points:
            return None
        x, y = zip(*self._curve, strict=True)
        return theil_sen_slope(x, y)

    def record(self, actors: int, data_share: float = 0.0, now: float | None = None) -> TaskRecord:
        """This task's record; ``data_share`` needs all tasks, see :func:`snapshot`."""
        rate = self.steps_per_s()
        warm = self.warm(now) and rate is not None and rate > 0
        return TaskRecord(
            name=self.name,
            weight=self.weight,
            actors=actors,
            steps_per_s=rate,
            step_time_spread=self.step_time_spread(),
            delivered=self.delivered,
            data_share=data_share,
            score=self.score(),
            target=self.target,
            progress=self.progress(),
            failures=self.failures,
            quarantined=self.quarantined,
            warm=warm,
            members=self.members,
        )


def snapshot(
    stats: Sequence[TaskStats], actors: Mapping[str, int], now: float | None = None
) -> list[TaskRecord]:
    """Records of all tasks, with each task's share of the env steps delivered to the learner."""
    total = sum(s.delivered for s in stats)
    return [
        s.record(actors.get(s.name, 0), s.delivered / total if total else 0.0, now) for s in stats
    ]
