"""The final greedy evaluation of ``mtrl train``: which tasks it plays and which it leaves out."""

from __future__ import annotations

import math
import time

import pytest

from mtrl.actors.faults import TaskFaults
from mtrl.config import ExperimentConfig
from mtrl.learner.distributed import DistContext
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import get_plugins
from mtrl.train.final_eval import final_eval


def test_a_recovered_task_keeps_its_eval_but_idle_quarantined_and_hung_ones_do_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    names = ["recovered", "idle", "quarantined", "clean", "hung"]
    cfg = ExperimentConfig.model_validate(
        {
            "tasks": [{"env": "gymnasium/CartPole-v1", "name": n} for n in names],
            "tracking": {"final_eval_episodes": 1},
        }
    )
    specs = [get_plugins().env_spec(t.env) for t in cfg.tasks]
    spaces = [TaskSpaces(s.observation_space, s.action_space) for s in specs]
    model = MultiTaskModel(spaces, cfg.learner.model)
    faults = [TaskFaults() for _ in names]
    now = time.monotonic()
    faults[0].record_fault("raise", "the env raised once", now)
    faults[0].record_unroll(now + 1)  # its actor was restarted and delivered again
    faults[2].record_fault("hang", "hung again", now)
    faults[2].quarantined = True
    faults[4].record_fault("hang", "a step outlived step_timeout_s", now)
    faults[4].record_unroll(now + 1)  # restarted and delivering, but it hung once
    record: dict[str, float] = {}
    out = final_eval(
        cfg, model, specs, [t.key for t in cfg.tasks], faults, record, DistContext.from_env({}),
        env_steps=[640, 0, 320, 640, 640],
    )  # fmt: skip
    assert sorted(out.returns) == [0, 3]
    assert math.isfinite(record["eval/recovered/greedy_return"])
    assert "eval/idle/greedy_return" not in record
    printed = capsys.readouterr().out
    assert "greedy eval skipped for idle: no steps" in printed
    assert "greedy eval skipped for quarantined: quarantined" in printed
    assert "greedy eval skipped for hung: its env hung in training" in printed
    assert "recovered" not in printed


def test_a_task_whose_env_gives_nan_rewards_in_the_eval_says_why_it_has_no_score(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = ExperimentConfig.model_validate(
        {
            "tasks": [
                {
                    "env": "chaos/wrap",
                    "name": "nanny",
                    "num_envs": 2,
                    "env_kwargs": {"env": "gymnasium/CartPole-v1", "nan_after": 3},
                }
            ],
            "tracking": {"final_eval_episodes": 2},
        }
    )
    specs = [get_plugins().env_spec(t.env) for t in cfg.tasks]
    spaces = [TaskSpaces(s.observation_space, s.action_space) for s in specs]
    model = MultiTaskModel(spaces, cfg.learner.model)
    record: dict[str, float] = {}
    out = final_eval(
        cfg, model, specs, ["nanny"], [TaskFaults()], record, DistContext(), env_steps=[100]
    )
    assert out.returns == {} and "eval/nanny/greedy_return" not in record  # the table: '-'
    said = capsys.readouterr().out
    assert "greedy eval of nanny: no score" in said and "NaN or inf rewards" in said, said
