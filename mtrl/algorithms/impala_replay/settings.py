"""The settings of IMPALA with experience replay (``learner.impala_replay``; used when
``learner.algorithm: impala_replay``), registered with the rule
(:mod:`mtrl.algorithms.builtin`) so the host validates the section.

LASER's recipe (Schmitt et al. 2020): every update trains on the fresh unrolls *and* on
unrolls drawn again from a per-task replay, in a set proportion, V-trace correcting both for
the policy that acted. The rule is :mod:`mtrl.algorithms.impala_replay.learner`; every IMPALA
setting (``learner.learning_rate``, PopArt, the parallel modes, ...) applies as it is; the
replay's size is the experiment's ``replay:`` section, shared with every replay-based rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field

from mtrl.config.base import ConfigModel

DEFAULT_CAPACITY = 100_000
"""Env steps IMPALA with replay keeps per task when ``replay.capacity`` is null."""


class ImpalaReplaySettings(ConfigModel):
    """How much of each batch is replayed (how much each task's replay holds is the
    experiment's ``replay:`` section)."""

    moved_keys: ClassVar[Mapping[str, str]] = {
        "capacity": "replay.capacity (the top-level replay: section every replay-based rule "
        "reads; the same env steps per task)",
    }

    proportion: float = Field(default=0.5, ge=0, lt=1)
    """Share of each update's env columns drawn from the replay: for a task's ``N`` fresh
    columns, ``round(N x p / (1 - p))`` replayed ones of the same task (0.5: as many as
    fresh; LASER's Atari setting is 0.875). A task's replay is drawn from only once it holds
    that many sequences. ``learner.batch_size`` counts the fresh columns an update waits for,
    so an update trains on ``batch_size / (1 - p)`` columns: to keep plain IMPALA's batch and
    update ``1 / (1 - p)`` times as often per env step (LASER's trade), set ``batch_size`` to
    ``(1 - p)`` of IMPALA's."""

    def replayed_columns(self, fresh: int) -> int:
        """Replayed env columns that go with ``fresh`` fresh ones of a task."""
        return round(fresh * self.proportion / (1.0 - self.proportion))
