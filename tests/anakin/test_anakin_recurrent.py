"""Anakin with a recurrent core: rollouts carry the core states on the device, exactly as the
serial numpy path does, and the memory task is learned with no host round-trip."""

from __future__ import annotations

import pytest
import torch

from mtrl.actors.core_states import CoreStates
from mtrl.actors.inference import InferenceModel
from mtrl.actors.runner import SerialActor
from mtrl.actors.unroll import UnrollBuffer
from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.anakin import AnakinRunner, train_anakin
from mtrl.config import LearnerConfig
from mtrl.learner.batch import task_batch
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import make_env

ENV = "memory/CueRecall-v0"
FIELDS = ("obs", "actions", "behaviour_logp", "rewards", "terminated", "valid", "core_state")


def _cfg(core: str) -> LearnerConfig:
    return LearnerConfig.model_validate(
        {
            "learning_rate": 0.003,
            "lr_schedule": "constant",
            "model": {"encoder_dim": 32, "torso": [32], "core": {"kind": core, "hidden": 32}},
        }
    )


def _model(core: str) -> MultiTaskModel:
    env = make_env(ENV, 1)
    torch.manual_seed(0)
    spaces = [TaskSpaces(env.single_observation_space, env.single_action_space)]
    return MultiTaskModel(spaces, _cfg(core).model)


@pytest.mark.parametrize("core", ["lstm", "gru"])
def test_anakin_batches_and_states_equal_the_serial_numpy_paths(core: str) -> None:
    model = _model(core)
    kwargs = {"delay": 2}
    actor = SerialActor(0, make_env(ENV, 6, seed=3, **kwargs), 8, 1.0, state_size=model.state_size)
    states = CoreStates(InferenceModel(model, shared=True))

    def act(buf: UnrollBuffer, t: int) -> None:
        raw, logp, version = states.act(0, [(0, buf, t)])
        buf.actions[t], buf.behaviour_logp[t], buf.versions[t] = raw, logp, version

    torch.manual_seed(3)
    serial = [task_batch(actor.collect(act), torch.device("cpu")) for _ in range(4)]
    runner = AnakinRunner(0, make_env(ENV, 6, seed=3, **kwargs), 8, reward_scale=1.0)
    torch.manual_seed(3)
    anakin = [runner.collect(model, 0) for _ in range(4)]
    assert not anakin[0].core_state.any() and anakin[-1].core_state.any()
    for s, a in zip(serial, anakin, strict=True):
        for f in FIELDS:
            x, y = getattr(s, f), getattr(a, f)
            assert x.dtype == y.dtype and x.shape == y.shape, f
            torch.testing.assert_close(y, x, rtol=0, atol=1e-6, msg=f)
        assert torch.equal(s.actions, a.actions)


@pytest.mark.timeout(120)
def test_the_memory_task_is_learned_in_anakin_mode() -> None:
    torch.set_num_threads(1)
    model = _model("lstm")
    learner = ImpalaLearner(model, _cfg("lstm"), ["cue"])
    runner = AnakinRunner(0, make_env(ENV, 16, seed=1), 12, reward_scale=1.0)
    result = train_anakin([runner], learner, 60_000, target_return=0.9)
    mean = result.mean_recent_return(0)
    assert mean is not None and mean >= 0.9, f"{mean} after {result.env_steps} steps"
