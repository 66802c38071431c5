"""The trainer's queue of waiting unrolls: what an update takes, what waits, what is overdue."""

from __future__ import annotations

import time

import numpy as np
from gymnasium import spaces

from mtrl.actors.protocol import UnrollInfo
from mtrl.actors.server import ReadyUnroll
from mtrl.actors.unroll import UnrollBuffer
from mtrl.unroll_queue import UnrollQueue

OBS, ACT = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(2)


def _unroll(task: int, num_envs: int = 4, length: int = 5) -> ReadyUnroll:
    buf = UnrollBuffer.allocate(task, length, num_envs, OBS, ACT)
    return ReadyUnroll(
        actor_id=task, task=task, buffer=buf, info=UnrollInfo(slot=0, env_steps=num_envs * length)
    )


def test_without_targets_everything_goes_in_once_the_batch_is_full() -> None:
    q = UnrollQueue(2, max_hold_s=5.0)
    q.add(_unroll(0))
    assert q.take(min_columns=8) is None and len(q) == 1  # 4 columns < 8: all keep waiting
    q.add(_unroll(0))
    q.add(_unroll(1))
    assert [ru.task for ru in q.take(min_columns=8)] == [0, 0, 1]
    assert len(q) == 0 and q.share_metrics(["a", "b"]) == {}


def test_a_task_ahead_waits_and_is_let_in_when_overdue() -> None:
    q = UnrollQueue(2, max_hold_s=0.2)
    q.set_targets([0.5, 0.5])
    q.delivered([(0, 100), (1, 20)])  # task 0 far ahead
    q.add(_unroll(0))
    assert q.take(min_columns=1) is None, "held: task 0 is more than one unroll ahead"
    q.add(_unroll(1))
    assert [ru.task for ru in q.take(min_columns=1)] == [1]
    assert q.overdue == 0
    time.sleep(0.25)
    assert [ru.task for ru in q.take(min_columns=1)] == [0]  # waited past max_hold_s
    metrics = q.share_metrics(["a", "b"])
    assert q.overdue == 1 and metrics["scheduler/overdue_unrolls"] == 1.0
    assert metrics["scheduler/a/target_share"] == 0.5
    assert q.drain() == []
