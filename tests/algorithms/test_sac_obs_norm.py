"""Observation normalisation by running statistics (``learner.sac.normalize_obs``): the
statistics are numpy's mean and variance of the observations fed, whatever the split; the actors'
policy normalises as the learner does (the statistics travel with the weights); a checkpoint,
``mtrl eval``'s model and a reset keep them; refused with data-parallel replicas in one line. The
stacked step against the per-task step with it on: tests/algorithms/test_sac_stacked_step.py."""

from __future__ import annotations

import copy
import io
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl.actors.inference import InferenceModel
from mtrl.actors.shared_weights import SharedWeights, WeightsReader
from mtrl.algorithms.sac import SacLearner, make_sac_learner, obs_norm, resets
from mtrl.algorithms.sac.obs_norm import CLIP, merge_moments, normalize
from mtrl.checkpoint import check_plain
from mtrl.cli import main
from mtrl.config import parse_config
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from tests.refusals import refused_text

T, N = 8, 2
BOX = TaskSpaces(spaces.Box(-8, 8, (3,), np.float32), spaces.Box(-2, 2, (1,), np.float32))
CART = TaskSpaces(spaces.Box(-8, 8, (4,), np.float32), spaces.Discrete(2))
INTS = TaskSpaces(spaces.Box(0, 9, (3,), np.int64), spaces.Box(-1, 1, (1,), np.float32))
TASKS = [BOX, BOX, CART, INTS]


@settings(max_examples=50, deadline=None)
@given(
    data=st.lists(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=2), min_size=1, max_size=40),
    cuts=st.lists(st.integers(0, 40), max_size=5),
)
def test_merged_moments_are_numpys_whatever_the_split(data: list, cuts: list) -> None:
    rows = np.asarray(data, np.float64)
    count, mean, var = 0.0, np.zeros(2), np.ones(2)
    for part in np.split(rows, sorted(c for c in cuts if c <= len(rows))):
        count, mean, var = merge_moments(count, mean, var, part)
    assert count == len(rows)
    np.testing.assert_allclose(mean, rows.mean(0), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(var, rows.var(0), rtol=1e-7, atol=1e-7)


def test_normalize_centres_scales_and_clips() -> None:
    x = torch.tensor([[1.0, 3.0], [1.0, 1e6]])
    out = normalize(x, torch.tensor([1.0, 2.0]), torch.tensor([4.0, 1.0]))
    assert out[0, 0] == 0 and out[0, 1] == pytest.approx(1.0)
    assert out[1, 1] == CLIP


def _learner(normalize_obs: bool = True, tasks: list[TaskSpaces] = TASKS) -> SacLearner:
    cfg = parse_config(
        "tasks: [{env: a/b}]\ncheckpoint: {replay: true}\n"
        f"learner: {{algorithm: sac, unroll_length: {T}, model: {{encoder_dim: 16, torso: [16]}},"
        f" sac: {{replay_ratio: 4, batch_size: 16, learning_starts: 1, "
        f"normalize_obs: {str(normalize_obs).lower()}}}}}\n"
    )
    torch.manual_seed(0)
    model = MultiTaskModel(tasks, cfg.learner.model)
    return make_sac_learner(model, cfg.learner, [f"t{k}" for k in range(len(tasks))])


def _obs(space: spaces.Box, task: int, rng: np.random.Generator) -> torch.Tensor:
    shape = (T + 1, N, *space.shape)
    if np.issubdtype(space.dtype, np.integer):
        return torch.as_tensor(rng.integers(0, 10, shape))
    return torch.as_tensor(rng.normal(3.0 * task, 1.0 + task, shape), dtype=torch.float32)


def _batch(task: int, space: TaskSpaces, rng: np.random.Generator) -> TaskBatch:
    act = space.action_space
    actions = (
        torch.as_tensor(rng.integers(0, int(act.n), (T, N)))
        if isinstance(act, spaces.Discrete)
        else torch.as_tensor(rng.normal(size=(T, N, 1)), dtype=torch.float32)
    )
    return TaskBatch(
        task=task,
        obs=_obs(space.observation_space, task, rng),
        actions=actions,
        behaviour_logp=torch.zeros(T, N),
        rewards=torch.as_tensor(rng.normal(size=(T, N)), dtype=torch.float32),
        terminated=torch.zeros(T, N, dtype=torch.bool),
        truncated=torch.zeros(T, N, dtype=torch.bool),
        valid=torch.ones(T, N, dtype=torch.bool),
        policy_version=0,
    )


def _feed(learner: SacLearner, updates: int, seed: int = 4) -> list[list[TaskBatch]]:
    rng = np.random.default_rng(seed)
    fed = []
    for _ in range(updates):
        batches = [_batch(k, s, rng) for k, s in enumerate(learner.model.spaces)]
        learner.update(batches)
        fed.append(batches)
    return fed


def test_the_statistics_are_numpys_mean_and_variance_of_the_observations_fed() -> None:
    learner = _learner()
    fed = _feed(learner, 3)
    assert learner.obs_norm is not None and learner.gradient_steps > 0
    norms = learner.obs_norm.norms
    assert norms[3] is None  # integers keep their scaling by the bounds
    for task in range(3):
        rows = np.concatenate([b[task].obs[:-1].reshape(-1, b[task].obs.shape[-1]) for b in fed])
        norm = norms[task]
        assert norm is not None and float(norm.count) == len(rows)
        np.testing.assert_allclose(norm.mean.numpy(), rows.mean(0), rtol=1e-6)
        np.testing.assert_allclose(norm.var.numpy(), rows.var(0), rtol=1e-6)
    # One module per task, in front of the policy's and all four critics' encoders.
    enc = [learner.model.encoders[0]]
    enc += [q.encoders[0] for q in (learner.critic.q1, learner.critic.q2)]
    enc += [q.encoders[0] for q in (learner.target.q1, learner.target.q2)]
    assert all(obs_norm.encoder_norm(e) is norms[0] for e in enc)


def test_off_by_default_nothing_is_installed() -> None:
    learner = _learner(normalize_obs=False)
    assert learner.obs_norm is None
    assert not any("norm." in key for key in learner.model.state_dict())


def _normalised(model: torch.nn.Module, task: int, x: torch.Tensor) -> torch.Tensor:
    return model.encoders[task].prep(x)


def test_the_actors_normalise_as_the_learner_does() -> None:
    """The inference server's copy and a process actor's copy (shared-memory weights) read
    the statistics published with the weights, and act on the same features."""
    learner = _learner()
    server = InferenceModel(learner.model)
    shared = SharedWeights(learner.model)
    process_copy = copy.deepcopy(learner.model)  # what an actor process builds from
    reader = WeightsReader(shared.layout)
    try:
        _feed(learner, 2)
        server.publish(learner.model, learner.version)
        shared.publish(learner.model, learner.version)
        assert reader.load(process_copy, 0) == learner.version
        x = torch.as_tensor(np.random.default_rng(1).normal(2, 3, (5, 3)), dtype=torch.float32)
        want = _normalised(learner.model, 1, x)
        assert not torch.allclose(want, x.reshape(5, -1))  # statistics away from (0, 1)
        # The learner's stacked step reads the same statistics (tasks 0 and 1: one group).
        assert learner.stacked is not None and learner.stacked.groups[0].tasks == (0, 1)
        norm = learner.stacked.policy.norms[0]
        assert norm is not None
        both = torch.stack([_normalised(learner.model, 0, x), want])
        torch.testing.assert_close(norm(torch.stack([x, x])), both, rtol=0, atol=0)
        for actor in (server.model, process_copy):
            torch.testing.assert_close(_normalised(actor, 1, x), want, rtol=0, atol=0)
            with torch.no_grad():
                torch.testing.assert_close(
                    actor.embed(1, x), learner.model.embed(1, x), rtol=0, atol=0
                )
    finally:
        reader.close()
        shared.close()


def test_a_checkpoint_keeps_the_statistics_and_mtrl_evals_model_loads_them() -> None:
    learner = _learner()
    _feed(learner, 3)
    state = learner.state_dict()
    check_plain(state)
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    resumed = _learner()
    resumed.load_state_dict(torch.load(buf, weights_only=True))
    assert resumed.obs_norm is not None and learner.obs_norm is not None
    for a, b in zip(resumed.obs_norm.norms, learner.obs_norm.norms, strict=True):
        if a is not None and b is not None:
            for name in ("count", "mean", "var"):
                assert torch.equal(getattr(a, name), getattr(b, name))
    # The resumed learner goes on from them: the same next update in both.
    for one in (learner, resumed):
        one.rng = np.random.default_rng(9)
        torch.manual_seed(7)
        _feed(one, 1, seed=5)
    for a, b in zip(resumed.model.parameters(), learner.model.parameters(), strict=True):
        assert torch.equal(a, b)
    # `mtrl eval` builds the model as the rule prepares it and loads the checkpoint's.
    fresh = MultiTaskModel(TASKS, resumed.cfg.model)
    obs_norm.prepare_model(fresh)
    fresh.load_state_dict(state["model"])
    assert fresh.state_dict().keys() == state["model"].keys()
    assert obs_norm.encoder_norm(fresh.encoders[0]) is not None
    assert torch.equal(
        obs_norm.encoder_norm(fresh.encoders[0]).mean, state["model"]["encoders.0.prep.norm.mean"]
    )
    plain = MultiTaskModel(TASKS, resumed.cfg.model)
    obs_norm.prepare_model(plain)  # a checkpoint without statistics loads as before
    plain.load_state_dict(_learner(normalize_obs=False).model.state_dict())
    assert obs_norm.encoder_norm(plain.encoders[0]) is None


def test_a_reset_keeps_the_statistics() -> None:
    learner = _learner()
    _feed(learner, 2)
    assert learner.obs_norm is not None
    before = [n.mean.clone() for n in learner.obs_norm.norms if n is not None]
    resets.reset(learner)
    after = [n.mean for n in learner.obs_norm.norms if n is not None]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


RUN = """
tasks: [{env: gymnasium/Pendulum-v1}]
learner:
  algorithm: sac
  parallel: {data_parallel: 2}
  sac: {normalize_obs: true}
tracking: {run_dir: RUNS}
"""


@pytest.mark.parametrize("command", ["validate", "train"])
def test_normalize_obs_with_data_parallel_replicas_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    line = refused_text(command, RUN, tmp_path, capsys)
    assert "learner.sac.normalize_obs" in line and "learner.parallel.data_parallel" in line, line


SHORT = """
seed: 3
total_env_steps: 640
tasks:
  - {env: gymnasium/Pendulum-v1, num_envs: 2, name: swing_a}
  - {env: gymnasium/Pendulum-v1, num_envs: 2, name: swing_b, env_kwargs: {g: 4.0}}
actors: {mode: serial}
learner:
  algorithm: sac
  unroll_length: 8
  batch_size: 2
  model: {encoder_dim: 16, torso: [16]}
  sac: {learning_starts: 100, batch_size: 32, replay_ratio: 8, normalize_obs: true}
checkpoint: {every_env_steps: null, every_s: null}
tracking: {console: quiet, csv: false, wandb: {mode: disabled}, final_eval_episodes: 2,
           log_every_s: 0.01, run_dir: RUNS}
"""


@pytest.mark.timeout(600)
def test_a_short_run_trains_checkpoints_and_evaluates_with_normalised_observations(
    tmp_path: Path,
) -> None:
    from mtrl.train.trainer import Trainer

    cfg = parse_config(SHORT.replace("RUNS", str(tmp_path / "runs")))
    trainer = Trainer(cfg, console=False)
    try:
        trainer.run()
        learner = trainer.learner
        assert learner.obs_norm is not None and learner.gradient_steps > 50
        for task, norm in enumerate(learner.obs_norm.norms):
            assert norm is not None
            assert float(norm.count) >= learner.replays[task].sampler.count > 0
            # Pendulum's (cos, sin, angular velocity): the velocity's spread is not 1.
            assert float(norm.var[2]) != pytest.approx(1.0, abs=1e-3)
    finally:
        trainer.close()
    # `mtrl eval` rebuilds the model from the checkpoint, statistics included, and acts with it.
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
