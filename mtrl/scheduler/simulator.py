"""A discrete-event simulator of the scheduler, for cluster sizes we cannot run here.

N actors each step a batch of ``envs_per_actor`` copies of one task in lock-step for
``unroll_length`` steps (a batch step lasts as long as its slowest copy, so jitter costs
throughput), hand the unroll to a learner queue, and start the next. Per-copy step times are
lognormal with an optional Pareto straggler tail; an unroll crashes with ``failure_prob`` and its
actor restarts after ``restart_delay_s``. Every ``rebalance_every_s`` the real
:class:`~mtrl.scheduler.TaskStats` → policy path re-allocates actors; moved actors switch at
their next unroll boundary and pay ``switch_delay_s`` to rebuild envs. The learner consumes
``learner_steps_per_s`` env steps per second (``None``: it keeps up) from a bounded FIFO queue;
actors block while it is full. Each task's normalised score follows ``1 - exp(-n / learn_steps)``
in the env steps ``n`` the learner consumed of it, plus noise, so ``progress`` can be compared.

Events live in one heap keyed by time; per-unroll durations are drawn in vectorised chunks.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mtrl.scheduler.records import Budget, Policy
from mtrl.scheduler.stats import TaskStats, snapshot


@dataclass(frozen=True)
class TaskModel:
    """One simulated task: its step-time distribution, failures and learning curve."""

    name: str
    weight: float = 1.0
    step_cost_s: float = 0.01
    """Median seconds of one copy's env step."""
    sigma: float = 0.25
    """Lognormal shape of per-copy step times (jitter)."""
    tail_prob: float = 0.0
    """Chance a copy's step is a straggler drawn from the Pareto tail instead."""
    tail_alpha: float = 1.5
    """Pareto index of stragglers (< 2: infinite variance)."""
    tail_scale: float = 10.0
    """Stragglers take at least ``tail_scale`` median steps."""
    failure_prob: float = 0.0
    """Chance an unroll crashes its actor."""
    learn_steps: float = 1e6
    """Env steps (consumed by the learner) to reach 63% of the reference score."""
    score_noise: float = 0.05
    """Standard deviation of an episode score around the learning curve."""
    target: float = 0.9
    """Normalised score at which the task counts as solved."""


@dataclass(frozen=True)
class SimConfig:
    """The simulated cluster and scheduler settings."""

    num_actors: int
    horizon_s: float
    rebalance_every_s: float = 30.0
    unroll_length: int = 20
    envs_per_actor: int = 8
    inference_s: float = 0.0
    """Seconds each batch step waits for actions (added to the slowest copy's step)."""
    restart_delay_s: float = 5.0
    switch_delay_s: float = 1.0
    learner_steps_per_s: float | None = None
    queue_unrolls: int = 256
    min_per_task: int = 1
    floor_share: float = 0.25
    warmup_s: float = 10.0
    stats_window: int = 1000
    max_failures: int | None = None
    seed: int = 0


@dataclass
class SimResult:
    """What a simulation reports; shares are over the last half of the horizon (steady state)."""

    tasks: list[str]
    weight_share: dict[str, float]
    data_share: dict[str, float]
    data_share_all: dict[str, float]
    final_actors: dict[str, int]
    final_score: dict[str, float]
    utilisation: float
    """Fraction of actor time spent stepping envs (crashed unrolls included)."""
    lost: dict[str, float] = field(default_factory=dict)
    """Fractions of actor time idle: restarting, switching task, blocked on the learner."""
    env_steps: int = 0
    decisions: int = 0
    decision_s_median: float = 0.0
    failures: int = 0
    events: int = 0
    wall_s: float = 0.0

    def max_share_error(self) -> float:
        """Largest relative deviation of a task's steady data share from its weight share."""
        return max(abs(self.data_share[t] / self.weight_share[t] - 1) for t in self.tasks)


def sample_unrolls(task: TaskModel, cfg: SimConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` unroll durations (seconds): sum over steps of the slowest copy plus inference."""
    shape = (n, cfg.unroll_length, cfg.envs_per_actor)
    t = task.step_cost_s * np.exp(task.sigma * rng.standard_normal(shape))
    if task.tail_prob > 0:
        tail = rng.random(shape) < task.tail_prob
        k = int(tail.sum())
        t[tail] = task.step_cost_s * task.tail_scale * (1.0 + rng.pareto(task.tail_alpha, k))
    return (t.max(axis=2) + cfg.inference_s).sum(axis=1)


_DONE, _READY, _LEARNED, _REBALANCE = 0, 1, 2, 3


class _Sim:
    """State of one run; :func:`simulate` is the entry point."""

    def __init__(self, tasks: Sequence[TaskModel], cfg: SimConfig, policy: Policy) -> None:
        if not tasks or cfg.num_actors < 1 or cfg.horizon_s <= 0:
            raise ValueError("need tasks, at least one actor and a positive horizon")
        self.tasks, self.cfg, self.policy = list(tasks), cfg, policy
        self.rng = np.random.default_rng(cfg.seed)
        self.k = len(self.tasks)
        self.steps_per_unroll = cfg.unroll_length * cfg.envs_per_actor
        self.stats = [
            TaskStats(
                t.name,
                t.weight,
                target=t.target,
                window=cfg.stats_window,
                warmup_s=cfg.warmup_s,
                max_failures=cfg.max_failures,
            )
            for t in self.tasks
        ]
        self.budget = Budget(cfg.num_actors, cfg.min_per_task, cfg.floor_share)
        self.buffers: list[deque[float]] = [deque() for _ in self.tasks]
        self.uniform: deque[float] = deque()
        self.normal: deque[float] = deque()
        self.consumed = np.zeros(self.k)
        self.consumed_late = np.zeros(self.k)
        self.heap: list[tuple[float, int, int, int]] = []
        self.seq = 0
        self.busy = self.restarting = self.switching = self.blocked_s = 0.0
        self.failures = self.decisions = self.events = 0
        self.decision_s: list[float] = []
        self.queue: deque[tuple[int, int]] = deque()
        self.blocked: deque[tuple[int, int, float]] = deque()
        self.learner_busy = False
        first = snapshot(self.stats, {}, 0.0)
        alloc = policy(first, self.budget)
        self.assigned = np.repeat(np.arange(self.k), [alloc[t.name] for t in self.tasks])
        self.running = self.assigned.copy()
        self.started = np.zeros(cfg.num_actors)

    def push(self, t: float, kind: int, who: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, who))

    def duration(self, task: int) -> float:
        buf = self.buffers[task]
        if not buf:
            n = int(np.clip(4 * np.sum(self.assigned == task), 64, 4096))
            buf.extend(sample_unrolls(self.tasks[task], self.cfg, n, self.rng).tolist())
        return buf.popleft()

    def draw(self) -> float:
        """A uniform [0, 1) number from a pre-drawn chunk (one numpy call per 8192)."""
        if not self.uniform:
            self.uniform.extend(self.rng.random(8192).tolist())
        return self.uniform.popleft()

    def gauss(self) -> float:
        """A standard normal number from a pre-drawn chunk."""
        if not self.normal:
            self.normal.extend(self.rng.standard_normal(8192).tolist())
        return self.normal.popleft()

    def start(self, actor: int, now: float) -> None:
        """Begin the actor's next unroll, switching task first if it was reassigned."""
        if self.running[actor] != self.assigned[actor]:
            self.running[actor] = self.assigned[actor]
            self.switching += self.cfg.switch_delay_s
            self.push(now + self.cfg.switch_delay_s, _READY, actor)
            return
        self.started[actor] = now
        self.push(now + self.duration(self.running[actor]), _DONE, actor)

    def done(self, actor: int, now: float) -> None:
        task = int(self.running[actor])
        elapsed = now - self.started[actor]
        self.busy += elapsed
        if self.draw() < self.tasks[task].failure_prob:
            self.failures += 1
            self.stats[task].observe_failure(elapsed + self.cfg.restart_delay_s)
            self.restarting += self.cfg.restart_delay_s
            self.push(now + self.cfg.restart_delay_s, _READY, actor)
            return
        self.stats[task].observe_step_times((elapsed / self.cfg.unroll_length,), now=now)
        if self.cfg.learner_steps_per_s is None:
            self.hand_over(actor, task, now)
            self.learn(task, now)
        elif len(self.queue) < self.cfg.queue_unrolls:
            self.hand_over(actor, task, now)
            self.enqueue(task, now)
        else:
            self.blocked.append((actor, task, now))
            return
        self.start(actor, now)

    def hand_over(self, actor: int, task: int, now: float) -> None:
        """The unroll leaves the actor: its wall time counts blocking on a full queue too, so
        the measured rate is what one more actor on the task would really deliver."""
        elapsed = now - self.started[actor]
        self.stats[task].observe_unroll(self.steps_per_unroll, elapsed, now=now)

    def enqueue(self, task: int, now: float) -> None:
        self.queue.append((task, self.steps_per_unroll))
        if not self.learner_busy:
            self.learner_busy = True
            self.push(now + self.steps_per_unroll / self.cfg.learner_steps_per_s, _LEARNED, -1)

    def learned(self, now: float) -> None:
        task, _ = self.queue.popleft()
        self.learn(task, now)
        self.learner_busy = False
        if self.blocked:
            actor, btask, since = self.blocked.popleft()
            self.blocked_s += now - since
            self.hand_over(actor, btask, now)
            self.enqueue(btask, now)
            self.start(actor, now)
        elif self.queue:
            self.learner_busy = True
            self.push(now + self.steps_per_unroll / self.cfg.learner_steps_per_s, _LEARNED, -1)

    def learn(self, task: int, now: float) -> None:
        n = self.steps_per_unroll
        self.consumed[task] += n
        if now >= self.cfg.horizon_s / 2:
            self.consumed_late[task] += n
        self.stats[task].observe_delivered(n)
        model = self.tasks[task]
        score = 1.0 - math.exp(-self.consumed[task] / model.learn_steps)
        self.stats[task].observe_episode(score + model.score_noise * self.gauss())

    def rebalance(self, now: float) -> None:
        t0 = time.perf_counter()
        counts = np.bincount(self.assigned, minlength=self.k)
        current = {t.name: int(c) for t, c in zip(self.tasks, counts, strict=True)}
        alloc = self.policy(snapshot(self.stats, current, now), self.budget)
        self.decision_s.append(time.perf_counter() - t0)
        self.decisions += 1
        want = np.array([alloc[t.name] for t in self.tasks])
        freed: list[int] = []
        for task in np.flatnonzero(counts > want):
            mine = np.flatnonzero(self.assigned == task)
            freed.extend(mine[want[task] - counts[task] :].tolist())
        for task in np.flatnonzero(counts < want):
            take, freed = freed[: want[task] - counts[task]], freed[want[task] - counts[task] :]
            self.assigned[take] = task

    def run(self) -> SimResult:
        cfg, wall = self.cfg, time.perf_counter()
        for actor in range(cfg.num_actors):
            self.start(actor, 0.0)
        self.push(cfg.rebalance_every_s, _REBALANCE, -1)
        while self.heap and self.heap[0][0] < cfg.horizon_s:
            now, _, kind, who = heapq.heappop(self.heap)
            self.events += 1
            if kind == _DONE:
                self.done(who, now)
            elif kind == _READY:
                self.start(who, now)
            elif kind == _LEARNED:
                self.learned(now)
            else:
                self.rebalance(now)
                self.push(now + cfg.rebalance_every_s, _REBALANCE, -1)
        return self.result(time.perf_counter() - wall)

    def result(self, wall_s: float) -> SimResult:
        cfg, names = self.cfg, [t.name for t in self.tasks]
        # Unrolls still running at the horizon count as stepping up to it, blocked actors as
        # blocked up to it; restart and switch delays are counted whole when they begin.
        busy = self.busy + sum(
            cfg.horizon_s - self.started[a] for _, _, kind, a in self.heap if kind == _DONE
        )
        blocked = self.blocked_s + sum(cfg.horizon_s - since for _, _, since in self.blocked)
        total = cfg.num_actors * cfg.horizon_s
        w = np.array([t.weight for t in self.tasks])
        late = self.consumed_late / max(self.consumed_late.sum(), 1.0)
        share = self.consumed / max(self.consumed.sum(), 1.0)
        counts = np.bincount(self.assigned, minlength=self.k)
        return SimResult(
            tasks=names,
            weight_share=dict(zip(names, (w / w.sum()).tolist(), strict=True)),
            data_share=dict(zip(names, late.tolist(), strict=True)),
            data_share_all=dict(zip(names, share.tolist(), strict=True)),
            final_actors=dict(zip(names, counts.tolist(), strict=True)),
            final_score={s.name: s.score() or 0.0 for s in self.stats},
            utilisation=min(1.0, busy / total),
            lost={
                "restarting": self.restarting / total,
                "switching": self.switching / total,
                "blocked": blocked / total,
            },
            env_steps=int(self.consumed.sum()),
            decisions=self.decisions,
            decision_s_median=float(np.median(self.decision_s)) if self.decision_s else 0.0,
            failures=self.failures,
            events=self.events,
            wall_s=wall_s,
        )


def simulate(tasks: Sequence[TaskModel], cfg: SimConfig, policy: Policy) -> SimResult:
    """Run one simulation of ``policy`` on ``tasks``; deterministic given ``cfg.seed``."""
    return _Sim(tasks, cfg, policy).run()


def atari57_like(
    rng: np.random.Generator,
    n: int = 57,
    median_cost_s: float = 0.005,
    cost_sigma: float = 0.6,
    heavy_tail_fraction: float = 0.1,
    failure_prob: float = 0.01,
    median_learn_steps: float = 5e5,
) -> list[TaskModel]:
    """``n`` tasks whose step costs spread ~10x (lognormal across games), a fraction of them
    with straggler tails (stochastic simulators), and difficulty (env steps to learn) spread
    lognormally too, so some tasks are solved early and others lag."""
    costs = median_cost_s * np.exp(cost_sigma * rng.standard_normal(n))
    heavy = rng.random(n) < heavy_tail_fraction
    learn = median_learn_steps * np.exp(1.0 * rng.standard_normal(n))
    return [
        TaskModel(
            name=f"game{i:02d}",
            step_cost_s=float(costs[i]),
            sigma=float(rng.uniform(0.1, 0.4)),
            tail_prob=0.02 if heavy[i] else 0.0,
            failure_prob=failure_prob,
            learn_steps=float(learn[i]),
        )
        for i in range(n)
    ]
