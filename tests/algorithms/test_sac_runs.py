"""SAC through the trainer: a run resumes from its checkpoint with and without the replay's
contents; configs and tasks SAC cannot train are refused in one line; the replay counts in the
pre-flight memory check."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.algorithms import make_learner
from mtrl.algorithms.sac.checks import SacUnsupportedError, check_tasks
from mtrl.algorithms.sac.learner import REFILL_NOTE
from mtrl.config import ExperimentConfig, parse_config
from mtrl.errors import ConfigError
from mtrl.learner.distributed import DistContext
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import Plugins, batch_env_from_gymnasium, get_plugins, hookimpl, load_plugins
from mtrl.replay import TransitionStorage
from mtrl.train import preflight
from mtrl.train.evaluate import evaluate, load_for_eval
from mtrl.train.trainer import Trainer
from tests.refusals import refusal

pytestmark = pytest.mark.timeout(600)

TINY = """
total_env_steps: 640
tasks: [{env: gymnasium/Pendulum-v1, num_envs: 2}, {env: gymnasium/CartPole-v1, num_envs: 2}]
actors: {mode: serial}
learner:
  algorithm: sac
  unroll_length: 8
  batch_size: 2
  model: {encoder_dim: 16, torso: [16]}
  sac: {learning_starts: 100, batch_size: 32, replay_ratio: 8}
checkpoint: {replay: REPLAY}
tracking: {console: quiet, csv: false, wandb: {mode: disabled}, final_eval_episodes: 0,
           run_dir: RUNS}
"""


def _config(tmp_path: Path, replay: bool) -> ExperimentConfig:
    plugins = get_plugins()
    text = TINY.replace("REPLAY", str(replay).lower()).replace("RUNS", str(tmp_path / "runs"))
    return parse_config(
        text, env_ids=plugins.envs.ids(), algorithms=plugins.algorithms.parallel_support()
    )


def _snapshot(trainer: Trainer) -> dict[str, Any]:
    learner = trainer.learner
    return {
        "counts": [r.sampler.count for r in learner.replays],
        "obs": [r.storage.arrays["obs"][: r.storage.size].copy() for r in learner.replays],
        "critic": {k: v.clone() for k, v in learner.critic.state_dict().items()},
        "target": {k: v.clone() for k, v in learner.target.state_dict().items()},
        "policy": {k: v.clone() for k, v in learner.model.state_dict().items()},
        "log_alpha": learner.log_alpha.detach().clone(),
        "gradient_steps": learner.gradient_steps,
        "version": learner.version,
    }


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("replay", [True, False])
def test_a_sac_run_resumes_from_its_checkpoint(
    tmp_path: Path, replay: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    trainer = Trainer(_config(tmp_path, replay), console=False)
    try:
        result = trainer.run()
        saved = _snapshot(trainer)
    finally:
        trainer.close()
    assert saved["gradient_steps"] > 0 and min(saved["counts"]) >= 100
    # `mtrl eval` rebuilds the model as SAC shapes it (squashed-Gaussian heads) and plays it.
    ckpt = load_for_eval(result.run_dir)
    played = evaluate(ckpt, episodes=2, modes=("greedy",), max_steps_per_episode=500)
    assert [r.episodes for r in played] == [2, 2]
    capsys.readouterr()
    resumed = Trainer.resume(result.run_dir, console=False, total_env_steps=1280)
    try:
        out = capsys.readouterr().out
        now = _snapshot(resumed)
        for key in ("critic", "target", "policy"):
            assert _same(now[key], saved[key]), key
        assert torch.equal(now["log_alpha"], saved["log_alpha"])
        assert (now["gradient_steps"], now["version"]) == (
            saved["gradient_steps"],
            saved["version"],
        )
        if replay:
            assert REFILL_NOTE not in out
            assert now["counts"] == saved["counts"]
            for a, b in zip(now["obs"], saved["obs"], strict=True):
                assert np.array_equal(a, b)
        else:
            assert out.count(REFILL_NOTE) == 1 and now["counts"] == [0, 0]
        first = resumed.learner.update  # count the gradient steps of the first update
        steps: list[int] = []

        def counted(batches: Any) -> dict[str, float]:
            before = resumed.learner.gradient_steps
            metrics = first(batches)
            steps.append(resumed.learner.gradient_steps - before)
            return metrics

        resumed.learner.update = counted
        resumed.run()
    finally:
        resumed.close()
    # With the replay the first update trains at once; without, only once it holds
    # learning_starts transitions per task again (each update brings 8 x 2 = 16 steps).
    assert (steps[0] > 0) is replay
    assert resumed.learner.gradient_steps > saved["gradient_steps"]
    assert min(r.sampler.count for r in resumed.learner.replays) >= 100


def test_a_recurrent_core_is_refused_by_the_rules_own_check() -> None:
    """SAC's check (registered with the rule) refuses a recurrent core when the config is
    parsed with the rules' checks, at ``learner.algorithm``'s line, and when a config built
    without them reaches the learner's factory."""
    text = (
        "tasks: [{env: gymnasium/CartPole-v1}]\nlearner:\n  algorithm: sac\n  model: {core: lstm}\n"
    )
    with pytest.raises(ConfigError) as err:
        parse_config(text, "exp.yaml", **get_plugins().config_context())
    (line,) = err.value.problems
    assert line.startswith("exp.yaml:3: learner.algorithm: learning rule 'sac'")
    assert "recurrent core" in line and "remove learner.model.core" in line
    cfg = parse_config(text, "exp.yaml")  # no checks without the registry
    model = MultiTaskModel([TaskSpaces(BOX_OBS, spaces.Discrete(2))], cfg.learner.model)
    with pytest.raises(ConfigError, match="recurrent core"):
        make_learner(get_plugins(), model, cfg.learner, ["t"], DistContext(), None)


@pytest.mark.parametrize("mode", ["task_sharded", "fsdp"])
def test_model_parallel_sac_is_refused_when_the_config_is_parsed(mode: str) -> None:
    plugins = get_plugins()
    with pytest.raises(ConfigError) as err:
        parse_config(
            "tasks: [{env: a/b}]\nlearner: {algorithm: sac, parallel: "
            f"{{data_parallel: 2, model_parallel: {mode}}}}}\n",
            algorithms=plugins.algorithms.parallel_support(),
        )
    assert f"'sac' does not support learner.parallel {mode}" in str(err.value)


@pytest.mark.parametrize("sync", ["local_sgd", "diloco", "async"])
def test_loosely_synchronised_sac_is_refused_when_the_config_is_parsed(sync: str) -> None:
    plugins = get_plugins()
    with pytest.raises(ConfigError) as err:
        parse_config(
            f"tasks: [{{env: a/b}}]\nlearner: {{algorithm: sac, parallel: {{sync: {sync}}}}}\n",
            algorithms=plugins.algorithms.parallel_support(),
        )
    assert "'sac' does not support learner.parallel loose_sync" in str(err.value)


def test_a_loosened_sync_of_a_split_model_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(
            "tasks: [{env: a/b}]\nlearner: {parallel: {sync: diloco, model_parallel: fsdp}}\n"
        )
    assert "sync: diloco averages whole replicas" in str(err.value)
    assert "model_parallel: fsdp" in str(err.value)


def test_data_parallel_sac_is_accepted() -> None:
    plugins = get_plugins()
    cfg = parse_config(
        "tasks: [{env: a/b}]\nlearner: {algorithm: sac, parallel: {data_parallel: 2}}\n",
        algorithms=plugins.algorithms.parallel_support(),
    )
    assert cfg.learner.parallel.data_parallel == 2


BOX_OBS = spaces.Box(-1, 1, (3,), np.float32)


@pytest.mark.parametrize(
    "space, why",
    [
        (
            TaskSpaces(BOX_OBS, spaces.MultiDiscrete([3, 2])),
            "SAC supports Discrete and bounded Box",
        ),
        (TaskSpaces(BOX_OBS, spaces.Box(-np.inf, 1, (2,), np.float32)), "not bounded"),
        (
            TaskSpaces(
                spaces.Dict({"x": BOX_OBS, "action_mask": spaces.MultiBinary(2)}),
                spaces.Discrete(2),
            ),
            "'action_mask'",
        ),
    ],
)
def test_actions_sac_cannot_train_are_named(space: TaskSpaces, why: str) -> None:
    ok = TaskSpaces(BOX_OBS, spaces.Discrete(2))
    check_tasks([ok, TaskSpaces(BOX_OBS, spaces.Box(-1, 1, (2,)))], ["a", "b"])
    with pytest.raises(SacUnsupportedError) as err:
        check_tasks([ok, space], ["a", "odd"])
    msg = str(err.value)
    assert msg.startswith("learner.algorithm: sac cannot train tasks[1] ('odd')") and why in msg
    assert "\n" not in msg


class _Dials(gym.Env):
    """Two dials to turn: a MultiDiscrete action."""

    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.MultiDiscrete([3, 3])

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> tuple:
        return np.zeros(2, np.float32), 0.0, False, False, {}


@pytest.fixture
def dials(monkeypatch: pytest.MonkeyPatch) -> Plugins:
    @hookimpl
    def mtrl_register_envs(register: Any) -> None:
        register.env(
            "Dials-v0", lambda num_envs, seed: batch_env_from_gymnasium(_Dials, num_envs, seed)
        )

    plugins = load_plugins(
        autoload=False,
        extra={"dials": types.SimpleNamespace(mtrl_register_envs=mtrl_register_envs)},
    )
    monkeypatch.setattr("mtrl.plugins.manager._CACHED", plugins)
    return plugins


def test_training_an_unsupported_action_space_stops_in_one_line(
    dials: Plugins, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "sac.yaml"
    cfg.write_text(
        TINY.replace("gymnasium/Pendulum-v1", "dials/Dials-v0")
        .replace("REPLAY", "false")
        .replace("RUNS", str(tmp_path / "runs"))
    )
    line = refusal("train", cfg, tmp_path / "runs", capsys)
    assert "sac cannot train tasks[0] ('dials/Dials-v0')" in line and "MultiDiscrete" in line


def test_the_replay_counts_in_the_memory_check() -> None:
    cartpole = (spaces.Box(-np.inf, np.inf, (4,), np.float32), spaces.Discrete(2))
    image = (spaces.Box(0, 255, (4, 84, 84), np.uint8), spaces.Discrete(6))
    tasks = [{"env": "a/x", "num_envs": 4}, {"env": "a/y", "num_envs": 4}]
    sac = {"algorithm": "sac", "unroll_length": 10}
    replay = {"capacity": 100_000}
    cfg = ExperimentConfig.model_validate({"tasks": tasks, "learner": sac, "replay": replay})
    replay = preflight.replay_need(cfg)
    sizes = preflight.task_sizes(cfg, [cartpole, image], replay)
    parts = {p.what: p for p in preflight.estimate(cfg, sizes, on_device=False, replay=replay)}
    for i, (obs, act) in enumerate([cartpole, image]):
        part = parts[f"tasks[{i}] replay"]
        assert part.nbytes == TransitionStorage.nbytes(100_000, 10, obs, act)
        assert not part.on_device and part.blame[0].field == "replay.capacity"
    assert parts["tasks[1] replay"].nbytes > 2.8e9  # 84x84x4 bytes x 100k, and a bit
    impala = ExperimentConfig.model_validate({"tasks": tasks})
    assert preflight.replay_need(impala) is None
    plain = preflight.task_sizes(impala, [cartpole, image])
    assert not any("replay" in p.what for p in preflight.estimate(impala, plain, False))
    # Lower bound (no spaces): one byte of observation per transition still counts.
    huge = {"tasks": tasks, "learner": sac, "replay": {"capacity": 10**13}}
    with pytest.raises(preflight.MemoryCheckError) as err:
        preflight.check_memory(ExperimentConfig.model_validate(huge))
    (line,) = err.value.problems
    assert "replay.capacity = 10000000000000" in line
    assert "; lower replay.capacity" in line
