"""The population's scheduler: Ray Tune's PBT or PB2, synchronous (by default: ranked at equal
env steps) or asynchronous (``tune.synchronous: false``).

Synchronous (``synch=True``): at each interval's end the members wait for each other and are
ranked at the same env steps, so a member is never judged against one that trained longer.

Ray Tune's synchronous mode (2.60 here) sets the next meeting point to
``max(previous + interval, latest env steps any member reached)``, and a paused member runs
again only while its env steps are *below* that point. Members overshoot each interval a
little (an update takes whole batches), and a restored population (``--resume``) starts the
scheduler again from its first meeting point; either way the maximum can win, every member is
then *at* the meeting point, none is below it, and all stay paused forever (the fix proposed
upstream, ray-project/ray PR 48616, was not merged). :class:`_MeetAhead` moves the next meeting
point past every member's env steps after each meeting (:func:`next_meeting`).

Imports Ray Tune: :func:`mtrl.tune.runner.run_population` imports this module once it has
checked that the ``tune`` extra is installed.
"""

from __future__ import annotations

from typing import Any

from ray.tune.schedulers import PopulationBasedTraining
from ray.tune.schedulers.pb2 import PB2

from mtrl.config import ExperimentConfig
from mtrl.tune.space import bounds, mutations

__all__ = ["SynchPB2", "SynchPBT", "make_scheduler", "next_meeting"]


def next_meeting(planned: int, reached: list[int]) -> int:
    """The env steps at which the members next meet: Ray's ``planned`` point, or, when a
    member has already reached it, one step past the furthest member, so that every member
    meets again at the end of its next interval (env steps are whole numbers)."""
    furthest = max(reached, default=0)
    return planned if planned > furthest else furthest + 1


class _MeetAhead:
    """Mixed into Ray's PBT and PB2: after each meeting, the next one lies ahead of every
    member (module docstring)."""

    _next_perturbation_sync: int
    _trial_state: dict[Any, Any]

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        before = self._next_perturbation_sync
        decision = super().on_trial_result(tune_controller, trial, result)  # type: ignore[misc]
        if self._next_perturbation_sync != before:  # the members met
            self._next_perturbation_sync = next_meeting(
                self._next_perturbation_sync,
                [s.last_train_time for s in self._trial_state.values()],
            )
        return decision


class SynchPBT(_MeetAhead, PopulationBasedTraining):
    """Ray's PBT whose members always meet again (module docstring)."""


class SynchPB2(_MeetAhead, PB2):
    """Ray's PB2 whose members always meet again (module docstring)."""


def make_scheduler(cfg: ExperimentConfig) -> Any:
    """The PBT or PB2 scheduler that ``cfg.tune`` asks for, synchronous (members meet; module
    docstring) or not (``tune.synchronous: false``: Ray's own asynchronous schedulers)."""
    tc = cfg.tune
    assert tc is not None
    common: dict[str, Any] = dict(
        time_attr="env_steps",
        metric="score",
        mode="max",
        perturbation_interval=tc.interval_env_steps,
        quantile_fraction=tc.quantile,
        synch=tc.synchronous,
    )
    if tc.algorithm == "pb2":
        pb2 = SynchPB2 if tc.synchronous else PB2
        return pb2(hyperparam_bounds=bounds(tc), **common)
    pbt = SynchPBT if tc.synchronous else PopulationBasedTraining
    return pbt(
        hyperparam_mutations=mutations(tc),
        resample_probability=tc.resample_probability,
        **common,
    )
