"""Sharded replay (``replay.shards``): each task's replay split over Ray actors, behind the same
interface as the learner's own :class:`~mtrl.replay.task_replay.TaskReplay`.

The shard actors are :class:`~mtrl.replay.shard_group.ShardGroup`'s (placement beside the
actors, restarts, each node's route).
:class:`ShardedTaskReplay` is one task's front in the learner's process, with the methods a
learning rule calls on a ``TaskReplay`` (``add_unroll``, ``sample``, ``update_priorities``,
``sampler.count``, ``state_dict``), so a rule does not know which it has:

* **inserts** come from the task's Ray actors, each into a shard on its own node
  (:mod:`mtrl.actors.shard_insert`; the learner is handed the shard's answer in a summary,
  :meth:`ShardedTaskReplay.acknowledge`), or from the learner (local actors, a rule that needs
  the fresh unroll), to the task's shards in turn without waiting; the items count as stored
  once acknowledged. Every answer of a shard is numbered, so the newest wins whoever got it;
* **draws** split the batch over the shards in proportion to their total mass and combine the
  parts with the unsharded importance weights (:mod:`mtrl.replay.shard_math`: the sampling
  distribution is the unsharded one's), and ask for the next batch at once (``prefetch``), so
  the learner's next draw finds it ready; one call per shard may draw several batches' rows
  (``draw_batches``), handed out in turn, so small batches do not pay a Ray call each;
* **priority updates** go to each shard in one call per ``draw_batches`` draws, without
  waiting;
* **a lost shard** (its actor or node died) is counted, its acknowledged items reported lost,
  and it is started again empty (``restart_lost``); a draw that it was part of is made up from
  the other shards;
* **the rate limiter** (``replay.shards.rate_limit``, :mod:`mtrl.replay.rate_limiter`) holds
  samples per insert: with ``waits: learner`` a draw beyond the ratio waits for the inserts
  still on their way (the actors': asking the shards, at most ``max_wait_s``); with
  ``waits: actors`` a Ray actor whose shard is ahead of its share waits on it (bounded, in its
  summary), and an unroll the learner inserts beyond the ratio is held back in the front and
  goes in as draws make room (the trainer's unrolls, and so the actors' slots, wait on the
  learner). Where nothing in flight can restore the ratio the call goes ahead and is counted
  as an overrun.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from mtrl.actors.shard_insert import FIRST_POLL_S, LAST_POLL_S, ShardedUnroll, ShardRoute
from mtrl.actors.unroll import UnrollBuffer
from mtrl.config.replay import ReplayConfig
from mtrl.replay.batch_rows import concat_rows, num_rows, take_rows
from mtrl.replay.rate_limiter import RateLimiter
from mtrl.replay.shard import ShardStats
from mtrl.replay.shard_group import ShardGroup
from mtrl.replay.shard_math import (
    decode,
    encode,
    importance_weights,
    split_by_mass,
)
from mtrl.replay.state import require
from mtrl.replay.storage import SequenceBatch, SequenceStorage, TransitionBatch, TransitionStorage

__all__ = ["HELD_UNROLLS", "ShardGroup", "ShardedSampler", "ShardedTaskReplay"]

HELD_UNROLLS = 64
"""With ``waits: actors``: unrolls a task's front holds back at most; past it the oldest goes in
anyway (an overrun)."""


class Sent(NamedTuple):
    """A call to a task's shard: the shard's number, its generation when the call went out
    (a failure is the loss of that generation only: a call to a shard since replaced must not
    replace the new one) and the call's result ref."""

    shard: int
    generation: int
    ref: Any


class ReplayEmptied(RuntimeError):
    """A draw found no sampleable item left in a task's shards: the shards that held them
    were lost (their node with them) since the learner judged the task ready. The learner
    judges again (:attr:`ShardedSampler.count` no longer counts the lost items)."""


class ShardedSampler:
    """What a rule reads of a replay's sampler (``count``, ``capacity``, ``beta``), for a
    sharded replay: the front keeps the sampling state."""

    def __init__(self, front: ShardedTaskReplay) -> None:
        self._front = front

    @property
    def count(self) -> int:
        """Sampleable items acknowledged by the task's shards."""
        self._front.collect()
        return sum(s.count for s in self._front.stats)

    @property
    def capacity(self) -> int:
        return self._front.per_shard * len(self._front.keys)

    @property
    def beta(self) -> float:
        return self._front.beta

    @beta.setter
    def beta(self, value: float) -> None:
        self._front.beta = float(value)


class ShardedTaskReplay:
    """One task's replay over its shards, with ``TaskReplay``'s methods (module docstring)."""

    def __init__(
        self, storage: TransitionStorage | SequenceStorage, replay: ReplayConfig, group: ShardGroup
    ) -> None:
        self.task = storage.task
        self.group = group
        self.cfg = group.cfg
        self.prioritized = replay.prioritized
        self.beta = replay.priority_beta
        self.keys = group.keys(self.task)
        segments = -(-storage.num_segments // len(self.keys))
        self.items_per_segment = storage.capacity // storage.num_segments
        self.per_shard = segments * self.items_per_segment
        self.stats = group.open(self.task, storage.empty_like(1), segments)
        self.generations = [group.generation[k] for k in self.keys]
        self.sampler = ShardedSampler(self)
        rl = self.cfg.rate_limit
        self.limiter = (
            RateLimiter(rl.samples_per_insert, rl.min_size_to_sample, rl.error_buffer)
            if rl is not None
            else None
        )
        self._next = 0  # the shard the next unroll goes to
        self._adds: deque[Sent] = deque()  # pending adds, oldest first
        self._updates: list[Sent] = []  # pending priority updates
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []  # updates not sent yet
        self._held: deque[tuple[UnrollBuffer, float]] = deque()  # waits: actors
        self._prefetch: list[tuple[int, Sent]] | None = None  # a draw on its way: (count, call)
        self._rows: tuple[Any, np.ndarray, np.ndarray] | None = None  # drawn, not handed out
        self._rows_at = 0  # the next row of ``_rows`` handed out
        self.waits = {
            "learner_wait_s": 0.0,
            "insert_wait_s": 0.0,
            "rate_overruns": 0.0,
            "actor_wait_s": 0.0,
            "actor_overruns": 0.0,
            "actor_inserts": 0.0,
            "learner_inserts": 0.0,
        }
        self.actors_insert = False  # actors were told where to insert (:meth:`route`)
        self.while_waiting: Callable[[], None] | None = None
        """Called as a draw waits for the actors' inserts (the trainer takes their finished
        unrolls in, so they get their next ones to do: actors wait on the learner's loop)."""

    # -- keeping the shards' stats -----------------------------------------------------------

    def _handle(self, i: int) -> Any:
        self._sync_generations()
        return self.group.handle(self.keys[i])

    def _call(self, i: int, method: str, *args: Any) -> Sent:
        """Call ``method`` of shard ``i`` (not waited for)."""
        handle = self._handle(i)
        return Sent(i, self.generations[i], getattr(handle, method).remote(*args))

    def _apply(self, i: int, stats: ShardStats) -> None:
        """Take ``stats`` (an answer of shard ``i``, to this front or to an actor) unless a
        newer answer of the same shard is in already or it is a lost shard's; the limiter
        counts the items inserted since the answer taken before."""
        self._sync_generations()
        if stats.instance != self.group.instance.get(self.keys[i]):
            return  # the answer of a shard since started again
        now = self.stats[i]
        same = now.instance == stats.instance
        if same and stats.seq <= now.seq:
            return
        self.stats[i] = stats
        if self.limiter is not None:
            self.limiter.inserted(stats.inserted - (now.inserted if same else 0))

    def _sync_generations(self) -> None:
        """Forget (and report lost) what a shard held before it was started again."""
        for i, key in enumerate(self.keys):
            if self.group.generation[key] != self.generations[i]:
                self.group.lost_items += self.stats[i].count
                self.stats[i] = ShardStats()
                self.generations[i] = self.group.generation[key]

    def _get(self, sent: Sent) -> Any:
        """The result of call ``sent``, or None when its shard was lost (started again here
        unless that happened already, when another call to it failed)."""
        try:
            return self.group.ray.get(sent.ref)
        except self.group.lost_errors as e:
            self.group.replace(self.keys[sent.shard], sent.generation, type(e).__name__)
            self._sync_generations()
            return None

    def collect(self, block: bool = False) -> None:
        """Take in the acknowledged inserts and priority updates (``block``: the oldest
        insert's at least)."""
        if self._updates:
            done, _ = self.group.ray.wait([u.ref for u in self._updates], timeout=0)
            finished = set(done)
            for sent in [u for u in self._updates if u.ref in finished]:
                stats = self._get(sent)
                if stats is not None:
                    self._apply(sent.shard, stats)
            self._updates = [u for u in self._updates if u.ref not in finished]
        while self._adds:
            sent = self._adds[0]
            done, _ = self.group.ray.wait([sent.ref], timeout=None if block else 0)
            if not done:
                return
            self._adds.popleft()
            block = False
            stats = self._get(sent)
            if stats is not None:
                self._apply(sent.shard, stats)

    # -- TaskReplay's interface ----------------------------------------------------------------

    def add_unroll(self, buf: UnrollBuffer) -> tuple[np.ndarray, np.ndarray]:
        """Send ``buf`` to the task's next shard (copied out before this returns, so the caller
        may reuse it). No items are returned: they live in the shard (a device mirror of the
        replay is not kept for a sharded one)."""
        self.collect()
        if self.limiter is None or self.cfg.rate_limit.waits != "actors":
            self._send(buf)
        elif not self._held and self.limiter.can_insert(self._items(buf)):
            self._send(buf)
            self.collect(block=True)  # counted before the next insert is judged
        else:
            self._held.append((copy.deepcopy(buf), time.monotonic()))
            self._release_held()
        empty = np.zeros(0, np.int64)
        return empty, np.zeros(0, bool)

    def _items(self, buf: UnrollBuffer) -> int:
        """Items an unroll adds (its reset steps included)."""
        return self.items_per_segment * buf.num_envs

    def _send(self, buf: UnrollBuffer) -> None:
        i = self._next
        self._next = (i + 1) % len(self.keys)
        self._adds.append(self._call(i, "add", buf))
        self.waits["learner_inserts"] += 1

    def route(self) -> ShardRoute:
        """Where this task's Ray actors store their unrolls (:meth:`ShardGroup.route`); from
        now on a draw short of the ratio with ``waits: learner`` also waits for theirs."""
        self.actors_insert = True
        return self.group.route(self.task)

    def acknowledge(self, summary: ShardedUnroll) -> None:
        """Count an unroll an actor stored in shard ``summary.shard`` (its answer, its wait)."""
        self._apply(summary.shard, summary.ack)
        self.waits["actor_inserts"] += 1
        self.waits["actor_wait_s"] += summary.insert_wait_s
        self.waits["actor_overruns"] += float(summary.overrun)

    def _release_held(self) -> None:
        """Send the held unrolls the ratio allows now (the oldest past :data:`HELD_UNROLLS`
        regardless, as an overrun), each counted before the next is judged."""
        assert self.limiter is not None
        while self._held:
            buf, since = self._held[0]
            fits = self.limiter.can_insert(self._items(buf))
            if not fits and len(self._held) <= HELD_UNROLLS:
                return
            if not fits:
                self.waits["rate_overruns"] += 1
            self._held.popleft()
            self.waits["insert_wait_s"] += time.monotonic() - since
            self._send(buf)
            self.collect(block=True)

    def sample(
        self, batch_size: int, rng: np.random.Generator
    ) -> tuple[TransitionBatch | SequenceBatch, np.ndarray, np.ndarray]:
        """``batch_size`` items drawn across the shards in proportion to their masses, their
        global indices and their importance weights (as ``TaskReplay.sample``)."""
        self.collect()
        if self.limiter is not None:
            self._wait_to_sample(batch_size)
        batch, indices, masses = self._take(batch_size, rng)
        if self.cfg.prefetch and self._prefetch is None and self._left() < batch_size:
            self._prefetch = self._request(batch_size * self.cfg.draw_batches, rng)
        if self.limiter is not None:
            self.limiter.sampled(batch_size)
            if self.cfg.rate_limit.waits == "actors":
                self._release_held()
        if not self.prioritized:
            return batch, indices, np.ones(batch_size, np.float32)
        smallest = min(s.smallest for s in self.stats)
        smallest = min(smallest, float(masses.min()))  # a shard lost since the draw
        return batch, indices, importance_weights(masses, smallest, self.beta)

    def _wait_to_sample(self, n: int) -> None:
        """Wait until a draw of ``n`` keeps the ratio: for this front's inserts in flight,
        then (actors inserting) for the actors' inserts, asking the shards, at most
        ``max_wait_s``; past that, or with nothing that could come, draw (an overrun)."""
        assert self.limiter is not None
        began = time.monotonic()
        pause = FIRST_POLL_S
        while not self.limiter.can_sample(n):
            if self._adds:
                self.collect(block=True)
                continue
            waited = time.monotonic() - began
            if not self.actors_insert or waited >= self.cfg.rate_limit.max_wait_s:
                self.waits["rate_overruns"] += 1
                break
            if self.while_waiting is not None:
                self.while_waiting()
            time.sleep(pause)
            pause = min(pause * 2, LAST_POLL_S)
            self.refresh()
        self.waits["learner_wait_s"] += time.monotonic() - began

    def refresh(self) -> None:
        """Ask every shard for the task's stats now (the actors' inserts and the priority
        updates kept here included)."""
        self._send_priorities()
        for sent in [self._call(i, "stats", self.task) for i in range(len(self.keys))]:
            stats = self._get(sent)
            if stats is not None:
                self._apply(sent.shard, stats)

    def _request(self, n: int, rng: np.random.Generator) -> list[tuple[int, Sent]]:
        """Ask the shards for ``n`` items split by their masses: (count, call) per shard."""
        self._send_priorities()  # drawn with every priority the learner has sent back
        masses = np.array([s.total for s in self.stats])
        if not masses.sum() > 0:
            raise ReplayEmptied(f"task {self.task}: no sampleable item left in its shards")
        counts = split_by_mass(masses, n, rng)
        seeds = rng.integers(2**63, size=len(counts))
        return [
            (int(c), self._call(i, "sample", self.task, int(c), int(seeds[i])))
            for i, c in enumerate(counts)
            if c > 0
        ]

    def _gather(
        self, request: list[tuple[int, Sent]], rng: np.random.Generator
    ) -> tuple[Any, np.ndarray, np.ndarray]:
        """The parts of ``request`` joined; a lost shard's part drawn again from the others.
        All parts are waited for together first: Ray then pulls the large ones (kept in their
        node's object store) over every shard's link at once, not one after another."""
        self.group.ray.wait([sent.ref for _, sent in request], num_returns=len(request))
        parts, indices, masses, missing = [], [], [], 0
        for c, sent in request:
            out = self._get(sent)
            if out is None:
                missing += c
                continue
            batch, local, mass, stats = out
            self._apply(sent.shard, stats)
            parts.append(batch)
            indices.append(encode(sent.shard, local, self.per_shard))
            masses.append(mass)
        if missing:
            batch, idx, mass = self._gather(self._request(missing, rng), rng)
            parts.append(batch)
            indices.append(idx)
            masses.append(mass)
        return concat_rows(parts), np.concatenate(indices), np.concatenate(masses)

    def _left(self) -> int:
        """Rows drawn and not handed out yet."""
        return 0 if self._rows is None else num_rows(self._rows[0]) - self._rows_at

    def _take(self, n: int, rng: np.random.Generator) -> tuple[Any, np.ndarray, np.ndarray]:
        """``n`` rows: the next of those drawn ahead, then of the draw on its way, then of a
        draw made now (of ``draw_batches`` batches' rows)."""
        parts = []
        while (have := sum(len(p[1]) for p in parts)) < n:
            if self._left():
                take = np.arange(self._rows_at, self._rows_at + min(n - have, self._left()))
                batch, indices, masses = self._rows  # type: ignore[misc]
                parts.append((take_rows(batch, take), indices[take], masses[take]))
                self._rows_at += len(take)
                continue
            request, self._prefetch = self._prefetch, None
            if request is None:
                request = self._request(max(n - have, n * self.cfg.draw_batches), rng)
            batch, indices, masses = self._gather(request, rng)
            order = rng.permutation(len(indices))  # parts come shard by shard: mixed
            self._rows, self._rows_at = (take_rows(batch, order), indices[order], masses[order]), 0
        if len(parts) == 1:
            return parts[0]
        return (
            concat_rows([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
        )

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Send the items' TD errors to their shards, one call per shard (not waited for),
        for every ``draw_batches`` draws' updates together (and before the next draw is
        asked for)."""
        if not self.prioritized:
            return
        self._pending.append((np.ravel(indices), np.ravel(td_errors)))
        if len(self._pending) >= self.cfg.draw_batches:
            self._send_priorities()

    def _send_priorities(self) -> None:
        """The updates kept so far, one call per shard, in the order they came (the last
        of an item's updates wins, as in one replay)."""
        if not self._pending:
            return
        self.collect()
        shard, local = decode(np.concatenate([p[0] for p in self._pending]), self.per_shard)
        td = np.concatenate([p[1] for p in self._pending])
        self._pending = []
        for i in np.unique(shard):
            mine = shard == i
            self._updates.append(
                self._call(int(i), "update_priorities", self.task, local[mine], td[mine])
            )

    def metrics(self) -> dict[str, float]:
        """This task's waits and overruns (the learner's and the actors'), unrolls inserted by
        actors and by the learner, items inserted and drawn so far."""
        out = dict(self.waits)
        if self.limiter is not None:
            out["inserts"] = float(self.limiter.inserts)
            out["samples"] = float(self.limiter.samples)
        out["held_unrolls"] = float(len(self._held))
        return out

    def state_dict(self) -> dict[str, Any]:
        """Every shard's part of the task (copied here from the shards)."""
        self._send_priorities()
        self.collect(block=True)
        while self._adds:
            self.collect(block=True)
        refs = [self._handle(i).state_dict.remote(self.task) for i in range(len(self.keys))]
        return {"kind": "sharded", "shards": len(refs), "parts": self.group.ray.get(refs)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        where = f"sharded replay of task {self.task}"
        require(state, "kind", "sharded", where)
        require(state, "shards", len(self.keys), where)
        refs = [
            self._handle(i).load_state_dict.remote(self.task, part)
            for i, part in enumerate(state["parts"])
        ]
        self.stats = list(self.group.ray.get(refs))
        self._prefetch, self._rows, self._rows_at = None, None, 0  # drawn from what was there
