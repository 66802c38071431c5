"""The trainer's queue of waiting unrolls: what an update takes, what waits, what is overdue."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.actors.protocol import UnrollInfo
from mtrl.actors.server import ReadyUnroll
from mtrl.actors.unroll import UnrollBuffer
from mtrl.learner.batch import TaskBatch
from mtrl.train.unroll_queue import CAPPED_AFTER_UPDATES, UnrollQueue

OBS, ACT = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(2)


def _unroll(task: int, num_envs: int = 4, length: int = 5) -> ReadyUnroll:
    buf = UnrollBuffer.allocate(task, length, num_envs, OBS, ACT)
    return ReadyUnroll(
        actor_id=task, task=task, buffer=buf, info=UnrollInfo(slot=0, env_steps=num_envs * length)
    )


def _batch(task: int, samples: int) -> TaskBatch:
    """A learner batch of ``samples`` valid steps (only its task and size matter here)."""
    t = torch.zeros(samples, 1)
    return TaskBatch(task, t, t, t, t, t.bool(), t.bool(), torch.ones(samples, 1, dtype=bool), 0)


def test_without_targets_everything_goes_in_once_the_batch_is_full() -> None:
    q = UnrollQueue(2, max_hold_s=5.0)
    q.add(_unroll(0))
    assert q.take(min_columns=8) is None and len(q) == 1  # 4 columns < 8: all keep waiting
    q.add(_unroll(0))
    q.add(_unroll(1))
    assert [ru.task for ru in q.take(min_columns=8)] == [0, 0, 1]
    assert len(q) == 0
    assert q.share_metrics(["a", "b"]) == {  # no gate, no data yet: the targets only
        "scheduler/a/target_share": 0.5,
        "scheduler/b/target_share": 0.5,
    }


def test_a_task_ahead_waits_while_others_fill_the_batch_and_is_let_in_when_overdue() -> None:
    q = UnrollQueue(2, max_hold_s=0.2)
    q.set_targets([0.5, 0.5])
    q.delivered([(0, 100), (1, 20)])  # task 0 far ahead
    q.add(_unroll(0))
    q.add(_unroll(1))
    assert [ru.task for ru in q.take(min_columns=4)] == [1], "task 1's unroll fills the batch"
    assert len(q) == 1 and q.overdue == 0 and q.filled == 0
    q.add(_unroll(1))
    assert [ru.task for ru in q.take(min_columns=4)] == [1], "task 0 still held"
    time.sleep(0.25)
    q.add(_unroll(1))
    assert sorted(ru.task for ru in q.take(min_columns=4)) == [0, 1]  # waited past max_hold_s
    metrics = q.share_metrics(["a", "b"])
    assert q.overdue == 1 and metrics["scheduler/overdue_unrolls"] == 1.0
    assert metrics["scheduler/a/target_share"] == 0.5
    assert q.drain() == []


def test_the_gate_never_idles_the_learner_held_unrolls_fill_a_short_batch() -> None:
    q = UnrollQueue(3, max_hold_s=60.0)
    q.set_targets([1 / 3, 1 / 3, 1 / 3])
    q.delivered([(0, 300), (1, 200), (2, 20)])  # 0 far ahead, 1 ahead, 2 behind
    for task in (0, 1, 2):
        q.add(_unroll(task))
    # Task 2's unroll alone is 4 columns; the batch needs 8: the held unroll least ahead
    # (task 1) fills it, task 0 keeps waiting.
    assert [ru.task for ru in q.take(min_columns=8)] == [2, 1]
    assert q.filled == 1 and len(q) == 1
    assert q.take(min_columns=8) is None  # 4 columns waiting in all: nothing to do yet
    q.add(_unroll(0))
    assert [ru.task for ru in q.take(min_columns=8)] == [0, 0]
    assert q.share_metrics(["a", "b", "c"])["scheduler/filled_unrolls"] == 3.0


def test_without_holding_targets_only_steer_the_loss_weights() -> None:
    q = UnrollQueue(2, max_hold_s=60.0, weights=[2.0, 1.0], hold=False, max_loss_weight=4.0)
    q.set_targets([None, None])  # fixed policy: the weights are the targets
    q.delivered([(0, 100), (1, 100)])
    q.add(_unroll(0))
    taken = q.take(min_columns=4)
    assert [ru.task for ru in taken] == [0], "nothing is held"
    batches = [_batch(0, 200), _batch(1, 200)]
    q.weigh(batches)
    # equal data, target 2:1 -> task 0's loss weighs twice task 1's, mean weight 1
    assert batches[0].loss_weight == pytest.approx(2 * batches[1].loss_weight)
    assert batches[0].loss_weight + batches[1].loss_weight == pytest.approx(2.0)
    q.delivered([(0, 200), (1, 200)])
    metrics = q.share_metrics(["a", "b"])
    assert metrics["scheduler/a/target_share"] == pytest.approx(2 / 3)
    assert metrics["scheduler/a/effective_share"] == pytest.approx(2 / 3)
    assert "scheduler/overdue_unrolls" not in metrics


def test_a_starved_task_is_named_once_the_window_is_warm() -> None:
    q = UnrollQueue(2, max_hold_s=1.0, hold=False, max_loss_weight=2.0)
    for _ in range(CAPPED_AFTER_UPDATES):
        batches = [_batch(0, 190), _batch(1, 10)]
        q.weigh(batches)
        q.delivered([(b.task, b.num_samples) for b in batches])
    q.weigh([_batch(0, 190), _batch(1, 10)])
    assert q.capped() == [1]
    msg = q.capped_message(1, "slow")
    assert "'slow' gets 5.0% of the learner's data" in msg and "tasks[1].num_envs" in msg
    off = UnrollQueue(2, max_hold_s=1.0, max_loss_weight=None)
    off.weigh(batches := [_batch(0, 190), _batch(1, 10)])
    assert [b.loss_weight for b in batches] == [1.0, 1.0] and off.capped() == []


def test_with_loss_weights_the_gate_holds_only_while_a_weight_is_capped() -> None:
    q = UnrollQueue(2, max_hold_s=60.0, max_loss_weight=4.0)
    q.set_targets([0.5, 0.5])
    q.delivered([(0, 300), (1, 100)])  # task 0 ahead, but a weight of 3x is within the cap
    q.weigh([_batch(0, 20), _batch(1, 20)])
    q.add(_unroll(0))
    q.add(_unroll(1))
    assert sorted(ru.task for ru in q.take(min_columns=4)) == [0, 1], "weights suffice: no hold"
    q.delivered([(0, 3000)])  # now task 1 would need more than 4x: only data can help it
    q.weigh([_batch(0, 20), _batch(1, 20)])
    q.add(_unroll(0))
    q.add(_unroll(1))
    assert [ru.task for ru in q.take(min_columns=4)] == [1], "task 0 held while 1 is capped"
