"""The SAC learner on its own: the replay ratio holds whatever the size of the batches the
actors bring, tasks wait for ``learning_starts``, the batch mix follows the weighted data, the
actors' own inference code acts with SAC's policy, and the state is plain checkpoint data."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.actors.inference import InferenceModel
from mtrl.algorithms.sac import SacLearner, make_sac_learner
from mtrl.algorithms.sac.networks import SquashedGaussianHead
from mtrl.checkpoint import check_plain
from mtrl.config import parse_config
from mtrl.learner.batch import TaskBatch
from mtrl.learner.distributions import env_actions
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.replay import PrioritizedSampler, UniformSampler

BOX = TaskSpaces(spaces.Box(-8, 8, (3,), np.float32), spaces.Box(-2, 2, (1,), np.float32))
DISCRETE = TaskSpaces(spaces.Box(-5, 5, (4,), np.float32), spaces.Discrete(2))
T = 8


def _learner(sac: str, replay: bool = False, section: str = "{}") -> SacLearner:
    """``sac``: the ``learner.sac`` section; ``replay``: ``checkpoint.replay``; ``section``:
    the ``replay:`` section."""
    cfg = parse_config(
        "tasks: [{env: a/b}]\n"
        f"checkpoint: {{replay: {str(replay).lower()}}}\n"
        f"learner: {{algorithm: sac, unroll_length: {T}, model: {{encoder_dim: 16, torso: [16]}},"
        f" sac: {sac}}}\n"
        f"replay: {section}\n"
    )
    torch.manual_seed(0)
    model = MultiTaskModel([BOX, DISCRETE], cfg.learner.model)
    return make_sac_learner(model, cfg.learner, ["box", "discrete"])


def _batch(task: int, n: int, rng: np.random.Generator, weight: float = 1.0) -> TaskBatch:
    """``T`` steps of ``n`` copies of random data, reset step at row 3 of copy 0."""
    dim = 3 if task == 0 else 4
    actions = (
        torch.as_tensor(rng.normal(size=(T, n, 1)), dtype=torch.float32)
        if task == 0
        else torch.as_tensor(rng.integers(0, 2, (T, n)))
    )
    valid = torch.ones(T, n, dtype=torch.bool)
    valid[3, 0] = False
    terminated = torch.zeros(T, n, dtype=torch.bool)
    terminated[2, 0] = True
    return TaskBatch(
        task=task,
        obs=torch.as_tensor(rng.normal(size=(T + 1, n, dim)), dtype=torch.float32),
        actions=actions,
        behaviour_logp=torch.zeros(T, n),
        rewards=torch.as_tensor(rng.normal(size=(T, n)), dtype=torch.float32),
        terminated=terminated,
        truncated=torch.zeros(T, n, dtype=torch.bool),
        valid=valid,
        policy_version=0,
        loss_weight=weight,
    )


@pytest.mark.parametrize("columns", [[16, 16, 16], [1] * 48, [3, 1, 16, 5, 2, 7, 9, 5]])
def test_the_replay_ratio_holds_for_fast_and_slow_actors(columns: list[int]) -> None:
    # 8 samples per env step in batches of 32: a quarter gradient step per env step, however
    # many env columns each update brings (48 columns of 8 steps: 96 gradient steps).
    learner = _learner("{replay_ratio: 8, batch_size: 32, learning_starts: 1}")
    rng = np.random.default_rng(0)
    owed = 0.0
    for i, n in enumerate(columns):
        learner.update([_batch(i % 2, n, rng)])
        owed += T * n * 8 / 32
        assert learner.gradient_steps == int(owed)  # the fraction is carried, never lost
    assert learner.gradient_steps == 96 and learner.version == len(columns)


def test_a_task_is_sampled_only_once_its_replay_holds_learning_starts() -> None:
    learner = _learner("{replay_ratio: 32, batch_size: 32, learning_starts: 40}")
    rng = np.random.default_rng(1)
    learner.update([_batch(0, 4, rng), _batch(1, 2, rng)])  # 31 and 15 valid transitions
    assert learner.ready_tasks() == [] and learner.gradient_steps == 0
    learner.update([_batch(0, 4, rng), _batch(1, 2, rng)])  # 62 and 30
    assert learner.ready_tasks() == [0]
    # Only the ready task's 32 new env steps owe steps, and only it is sampled.
    assert learner.gradient_steps == 32
    diag = learner.pop_diagnostics()
    assert diag["learner/discrete/replay_transitions"] == 30
    assert "learner/box/alpha" in diag and "learner/discrete/alpha" not in diag
    metrics = learner.update([_batch(1, 2, rng)])  # 45: both ready now
    assert learner.ready_tasks() == [0, 1] and metrics["sac/ready_tasks"] == 2
    assert learner.gradient_steps == 32 + 16


def test_each_gradient_step_mixes_tasks_by_their_weighted_data() -> None:
    learner = _learner("{batch_size: 64, learning_starts: 1000}")  # no gradient steps here
    rng = np.random.default_rng(2)
    for _ in range(20):  # equal data, task 0 at loss weight 3 (its target share is 3x)
        learner.update([_batch(0, 2, rng, weight=3.0), _batch(1, 2, rng)])
    drawn = {k: 0 for k in (0, 1)}
    for _ in range(50):
        for group in learner._sample([0, 1]):
            for task, n in zip(group.tasks, group.sizes, strict=True):
                drawn[task] += n
    assert drawn[0] + drawn[1] == 50 * 64
    assert drawn[0] / (50 * 64) == pytest.approx(0.75, abs=0.01)


def test_the_actors_act_with_sacs_policy_through_their_own_code() -> None:
    learner = _learner("{learning_starts: 1}")
    model = learner.model
    assert isinstance(model.policy_heads[0], SquashedGaussianHead)
    inference = InferenceModel(model)  # the parallel actors' copy
    with torch.no_grad():
        model.policy_heads[0].log_std.weight.normal_()  # a state-dependent std
        inference.publish(model, 1)
    obs = np.random.default_rng(3).normal(size=(64, 3)).astype(np.float32)
    raw, logp, version = inference.act(0, obs)
    assert raw.shape == (64, 1) and logp.shape == (64,) and version == 1
    dist = model.policy(0, model.embed(0, torch.as_tensor(obs)))
    assert dist.log_std.std() > 0, "the std depends on the observation"
    a = env_actions(BOX.action_space, raw)
    assert (a >= -2).all() and (a <= 2).all()
    discrete_raw, _, _ = inference.act(1, obs[:, :2].repeat(2, 1))
    assert set(discrete_raw.tolist()) <= {0, 1}


@pytest.mark.parametrize("replay", [False, True])
def test_the_state_is_plain_data_and_keeps_the_replay_when_asked(replay: bool) -> None:
    learner = _learner("{replay_ratio: 4, batch_size: 16, learning_starts: 1}", replay)
    rng = np.random.default_rng(4)
    for _ in range(3):
        learner.update([_batch(0, 2, rng), _batch(1, 3, rng)])
    state = learner.state_dict()
    check_plain(state)
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    assert ("replay" in loaded) is replay
    other = _learner("{replay_ratio: 4, batch_size: 16, learning_starts: 1}", replay)
    other.load_state_dict(loaded)
    assert torch.equal(other.log_alpha, learner.log_alpha)
    assert other.gradient_steps == learner.gradient_steps and other.version == 3
    for a, b in zip(other.critic.parameters(), learner.critic.parameters(), strict=True):
        assert torch.equal(a, b)
    counts = [r.sampler.count for r in other.replays]
    assert counts == ([r.sampler.count for r in learner.replays] if replay else [0, 0])
    # The same random draws follow: the next update is identical in both.
    if replay:
        batches = [_batch(0, 2, np.random.default_rng(5))]
        torch.manual_seed(7)
        first = learner.update(batches)
        torch.manual_seed(7)
        assert other.update(batches) == first


def test_the_replay_section_sizes_and_samples_each_tasks_replay() -> None:
    """``replay.capacity`` transitions per task (null: SAC's 1,000,000) and the section's
    sampler with its exponents."""
    learner = _learner("{}", section="{capacity: 44, sampler: prioritized, priority_alpha: 0.3}")
    for replay in learner.replays:
        assert replay.storage.capacity == 48, "rounded up to whole unrolls of T = 8"
        assert isinstance(replay.sampler, PrioritizedSampler) and replay.sampler.alpha == 0.3
    default = _learner("{}")
    for replay in default.replays:
        assert replay.storage.capacity == 1_000_000
        assert isinstance(replay.sampler, UniformSampler)


def test_prioritized_replay_takes_the_critics_td_errors() -> None:
    learner = _learner(
        "{replay_ratio: 4, batch_size: 16, learning_starts: 1}",
        section="{sampler: prioritized, priority_beta: 0.4}",
    )
    learner.set_progress(0.5)
    assert [r.sampler.beta for r in learner.replays] == [0.7, 0.7]
    rng = np.random.default_rng(6)
    learner.update([_batch(0, 4, rng), _batch(1, 4, rng)])  # 64 env steps: 16 gradient steps
    assert learner.gradient_steps == 16
    for replay in learner.replays:
        leaves = replay.sampler.tree.leaves[: replay.storage.capacity]
        live = leaves[leaves > 0]
        # Items entered at priority 1; the drawn ones now hold (|TD| + eps)^alpha.
        assert len(np.unique(live)) > 2 and replay.sampler.max_priority > 1.0
        assert live.max() <= replay.sampler.max_priority**0.6
