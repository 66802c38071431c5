"""A discrete-event simulator of the scheduler, for cluster sizes we cannot run here.

N actors each step a batch of ``envs_per_actor`` copies of one task in lock-step for
``unroll_length`` steps (a batch step lasts as long as its slowest copy, so jitter costs
throughput), hand the unroll to a learner queue, and start the next. Per-copy step times are
lognormal with an optional Pareto straggler tail; an unroll crashes with ``failure_prob`` and its
actor restarts after ``restart_delay_s``. Every ``rebalance_every_s`` the real
:class:`~mtrl.scheduler.TaskStats` → policy path re-allocates actors; moved actors switch at
their next unroll boundary (or at once, dropping it, with ``preempt_moves``) and pay
``switch_delay_s`` to rebuild envs. The learner consumes
``learner_steps_per_s`` env steps per second (``None``: it keeps up) from a bounded FIFO queue;
actors block while it is full. Each task's normalised score follows ``1 - exp(-n / learn_steps)``
in the env steps ``n`` the learner consumed of it, plus noise, so ``progress`` can be compared.

Actor slots sit on ``nodes`` nodes (:mod:`mtrl.scheduler.sim.nodes`); ``node_events`` lose nodes
(their actors die at once: unrolls in flight are dropped and counted as failures of their tasks,
as the Ray pool counts an actor-died fault) and bring them back. The budget follows the live
nodes' slots as :meth:`~mtrl.scheduler.Rebalancer.set_slots` makes it; the next rebalance shares
the new budget among the live actors, which is how a lost task's actors come back "elsewhere".

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
from mtrl.scheduler.sim.nodes import NodeEvent, check_node_events, node_slots, resized
from mtrl.scheduler.sim.tasks import TaskModel
from mtrl.scheduler.stats import TaskStats, snapshot


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
    nodes: int = 1
    """Nodes the actor slots are spread over, in contiguous blocks."""
    node_events: tuple[NodeEvent, ...] = ()
    """Nodes lost and (re)joining during the run."""
    node_faults_to_stats: bool = True
    """Feed unrolls dropped with a node to the task's failure statistics, as the trainer feeds
    the Ray pool's actor-died faults; False counts them without lowering the measured rates."""
    preempt_moves: bool = False
    """Moved actors drop the unroll they are stepping and switch at once, as the Ray pool kills
    the actors it stops; False: they switch at their next unroll boundary."""
    sample_every_s: float | None = None
    """Record every task's cumulative delivered env steps this often (``SimResult.timeline``)."""


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
    """Fraction of live actor time spent stepping envs (crashed and dropped unrolls included)."""
    lost: dict[str, float] = field(default_factory=dict)
    """Fractions of live actor time idle: restarting, switching task, blocked on the learner,
    unassigned (joined with a node, waiting for the next rebalance)."""
    env_steps: int = 0
    decisions: int = 0
    decision_s_median: float = 0.0
    failures: int = 0
    """Failures of all kinds: crashed unrolls and unrolls dropped with a lost node."""
    node_failures: int = 0
    """Unrolls dropped because their actor's node was lost."""
    preempted: int = 0
    """Unrolls dropped because their actor was moved to another task (``preempt_moves``)."""
    task_failures: dict[str, int] = field(default_factory=dict)
    events: int = 0
    wall_s: float = 0.0
    timeline_s: list[float] = field(default_factory=list)
    """Sample times (every ``sample_every_s``)."""
    timeline: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    """(samples, tasks): env steps of each task the learner had consumed at each sample time."""

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


_DONE, _READY, _LEARNED, _REBALANCE, _NODE = 0, 1, 2, 3, 4


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
        check_node_events(cfg.node_events, cfg.nodes)
        self.node_slots = node_slots(cfg.num_actors, cfg.nodes)
        self.node_up = [True] * cfg.nodes
        self.token = [0] * cfg.num_actors  # seq of each actor's newest event: older ones are void
        self.pending = [_READY] * cfg.num_actors  # kind of that event
        self.idle_since: dict[int, float] = {}  # live actors with no task, since when
        self.live, self.live_since, self.live_actor_s = cfg.num_actors, 0.0, 0.0
        self.unassigned_s = 0.0
        self.node_failures = self.preempted = 0
        self.timeline: list[np.ndarray] = []
        self.next_sample = cfg.sample_every_s or math.inf
        self.buffers: list[deque[float]] = [deque() for _ in self.tasks]
        self.uniform: deque[float] = deque()
        self.normal: deque[float] = deque()
        self.consumed = np.zeros(self.k)
        self.consumed_late = np.zeros(self.k)
        self.heap: list[tuple[float, int, int, int]] = []
        self.seq = 0
        self.busy = self.restarting = self.switching = self.blocked_s = 0.0
        self.failures = self.decisions = self.events = 0
        self.task_failures = [0] * self.k
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
        if kind <= _READY:
            self.token[who], self.pending[who] = self.seq, kind
        heapq.heappush(self.heap, (t, self.seq, kind, who))

    def counts(self) -> np.ndarray:
        """Live actors assigned to each task (dead and unassigned ones hold the index ``k``)."""
        return np.bincount(self.assigned, minlength=self.k + 1)[: self.k]

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
            self.task_failures[task] += 1
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
        while now >= self.next_sample:
            self.sample()
        n = self.steps_per_unroll
        self.consumed[task] += n
        if now >= self.cfg.horizon_s / 2:
            self.consumed_late[task] += n
        self.stats[task].observe_delivered(n)
        model = self.tasks[task]
        score = 1.0 - math.exp(-self.consumed[task] / model.learn_steps)
        self.stats[task].observe_episode(score + model.score_noise * self.gauss())

    def sample(self) -> None:
        """Note the consumed env steps per task at the sample time just passed."""
        self.timeline.append(self.consumed.copy())
        self.next_sample += self.cfg.sample_every_s or math.inf

    def rebalance(self, now: float) -> None:
        t0 = time.perf_counter()
        counts = self.counts()
        current = {t.name: int(c) for t, c in zip(self.tasks, counts, strict=True)}
        alloc = self.policy(snapshot(self.stats, current, now), self.budget)
        self.decision_s.append(time.perf_counter() - t0)
        self.decisions += 1
        want = np.array([alloc[t.name] for t in self.tasks])
        freed: list[int] = sorted(self.idle_since)  # unassigned live actors go first
        for task in np.flatnonzero(counts > want):
            mine = np.flatnonzero(self.assigned == task)
            freed.extend(mine[want[task] - counts[task] :].tolist())
        held = {b[0] for b in self.blocked} if self.cfg.preempt_moves else set()
        for task in np.flatnonzero(counts < want):
            take, freed = freed[: want[task] - counts[task]], freed[want[task] - counts[task] :]
            self.assigned[take] = task
            for actor in take:
                if actor in self.idle_since:  # no event pending: start it (builds its envs)
                    self.unassigned_s += now - self.idle_since.pop(actor)
                    self.start(actor, now)
                elif self.cfg.preempt_moves and actor not in held and self.pending[actor] == _DONE:
                    self.busy += now - self.started[actor]  # stepped, then thrown away
                    self.preempted += 1
                    self.start(actor, now)  # voids its unroll's end

    def node_event(self, event: NodeEvent, now: float) -> None:
        """Lose or (re)join nodes, then resize the budget to the live slots."""
        self.live_actor_s += self.live * (now - self.live_since)
        self.live_since = now
        for node in event.nodes:
            if self.node_up[node] == (event.kind == "join"):
                continue
            self.node_up[node] = event.kind == "join"
            for actor in self.node_slots[node]:
                if event.kind == "lose":
                    self.kill(actor, now)
                else:
                    self.idle_since[actor] = now
            self.live += len(self.node_slots[node]) * (1 if event.kind == "join" else -1)
        self.budget = resized(self.budget, self.live, self.k)

    def kill(self, actor: int, now: float) -> None:
        """The actor dies with its node: the unroll it was stepping or holding (blocked on the
        learner queue) is dropped and counted as a failure of its task; its events go void."""
        task = int(self.running[actor])
        held = [b for b in self.blocked if b[0] == actor]
        stepping = not held and self.token[actor] >= 0 and self.pending[actor] == _DONE
        if held:
            self.blocked.remove(held[0])
            self.blocked_s += now - held[0][2]
        elif stepping:
            self.busy += now - self.started[actor]
        if held or stepping:
            self.failures += 1
            self.task_failures[task] += 1
            self.node_failures += 1
            if self.cfg.node_faults_to_stats:
                lost_s = now - self.started[actor] + self.cfg.restart_delay_s
                self.stats[task].observe_failure(lost_s)
        self.idle_since.pop(actor, None)
        self.token[actor] = -1
        self.assigned[actor] = self.running[actor] = self.k

    def run(self) -> SimResult:
        cfg, wall = self.cfg, time.perf_counter()
        for actor in range(cfg.num_actors):
            self.start(actor, 0.0)
        self.push(cfg.rebalance_every_s, _REBALANCE, -1)
        for i, event in enumerate(cfg.node_events):
            self.push(event.time_s, _NODE, i)
        while self.heap and self.heap[0][0] < cfg.horizon_s:
            now, seq, kind, who = heapq.heappop(self.heap)
            if kind <= _READY and self.token[who] != seq:
                continue  # the actor died with its node
            self.events += 1
            if kind == _DONE:
                self.done(who, now)
            elif kind == _READY:
                self.start(who, now)
            elif kind == _LEARNED:
                self.learned(now)
            elif kind == _NODE:
                self.node_event(cfg.node_events[who], now)
            else:
                self.rebalance(now)
                self.push(now + cfg.rebalance_every_s, _REBALANCE, -1)
        return self.result(time.perf_counter() - wall)

    def result(self, wall_s: float) -> SimResult:
        cfg, names = self.cfg, [t.name for t in self.tasks]
        # Unrolls still running at the horizon count as stepping up to it, blocked actors as
        # blocked up to it; restart and switch delays are counted whole when they begin.
        busy = self.busy + sum(
            cfg.horizon_s - self.started[a]
            for _, seq, kind, a in self.heap
            if kind == _DONE and self.token[a] == seq
        )
        blocked = self.blocked_s + sum(cfg.horizon_s - since for _, _, since in self.blocked)
        unassigned = self.unassigned_s + sum(cfg.horizon_s - t for t in self.idle_since.values())
        total = self.live_actor_s + self.live * (cfg.horizon_s - self.live_since)
        while self.next_sample <= cfg.horizon_s:
            self.sample()
        w = np.array([t.weight for t in self.tasks])
        late = self.consumed_late / max(self.consumed_late.sum(), 1.0)
        share = self.consumed / max(self.consumed.sum(), 1.0)
        counts = self.counts()
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
                "unassigned": unassigned / total,
            },
            env_steps=int(self.consumed.sum()),
            decisions=self.decisions,
            decision_s_median=float(np.median(self.decision_s)) if self.decision_s else 0.0,
            failures=self.failures,
            node_failures=self.node_failures,
            preempted=self.preempted,
            task_failures=dict(zip(names, self.task_failures, strict=True)),
            events=self.events,
            wall_s=wall_s,
            timeline_s=[(i + 1) * (cfg.sample_every_s or 0.0) for i in range(len(self.timeline))],
            timeline=np.array(self.timeline).reshape(len(self.timeline), self.k),
        )


def simulate(tasks: Sequence[TaskModel], cfg: SimConfig, policy: Policy) -> SimResult:
    """Run one simulation of ``policy`` on ``tasks``; deterministic given ``cfg.seed``."""
    return _Sim(tasks, cfg, policy).run()
