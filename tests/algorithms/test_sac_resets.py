"""SAC's periodic resets (``learner.sac.reset_every``, ``learner.sac.reset``): after the configured
gradient step and not before, every network is re-initialised as it was built (orthogonal weights of
the layer's gain, zero biases), the target critics equal the critics, the optimisers' states are
cleared, and the replay (and with ``reset: networks`` the temperatures and FAMO's logits) is kept;
the stacked step's per-task modules still alias its stacks and train on; a checkpoint keeps the
schedule; a short run resets and logs it; a resolved config (every field written, ``reset`` with no
schedule) parses back, and a schedule of 0 is refused."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

from mtrl.algorithms.sac import SacLearner, make_sac_learner, stacked_step
from mtrl.config import parse_config
from mtrl.errors import ConfigError
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import get_plugins
from mtrl.train.trainer import Trainer

T, N = 8, 3
BOX = TaskSpaces(spaces.Box(-4, 4, (5,), np.float32), spaces.Box(-1, 1, (2,), np.float32))
DISCRETE = TaskSpaces(spaces.Box(-4, 4, (4,), np.float32), spaces.Discrete(3))
TASKS = [BOX, BOX, DISCRETE]
STEPS = 24
"""Gradient steps per update of :func:`_update` (3 tasks x 24 env steps at a third of a step
each: ``replay_ratio: 8``, ``batch_size: 24``)."""


def _learner(
    sac: str = "", stacked: bool = False, seed: int = 0, multitask: str = "{}"
) -> SacLearner:
    """A learner of :data:`TASKS` (``sac``: more ``learner.sac`` keys, each after a comma;
    ``stacked``: the stacked step, else the per-task one; ``multitask``: that section)."""
    cfg = parse_config(
        "tasks: [{env: a/b}]\ncheckpoint: {replay: true}\n"
        f"learner: {{algorithm: sac, unroll_length: {T}, model: {{encoder_dim: 16, "
        f"torso: [16, 16]}}, multitask: {multitask}, "
        f"sac: {{replay_ratio: 8, batch_size: 24, learning_starts: 1 {sac}}}}}\n"
    )
    torch.manual_seed(seed)
    model = MultiTaskModel(TASKS, cfg.learner.model)
    before = stacked_step.ENABLED
    stacked_step.ENABLED = stacked
    try:
        learner = make_sac_learner(model, cfg.learner, ["a", "b", "c"])
    finally:
        stacked_step.ENABLED = before
    assert (learner.stacked is not None) is stacked
    return learner


def _batch(task: int, rng: np.random.Generator) -> TaskBatch:
    space = TASKS[task]
    obs = rng.normal(size=(T + 1, N, *space.observation_space.shape))
    if isinstance(space.action_space, spaces.Discrete):
        actions = torch.as_tensor(rng.integers(0, 3, (T, N)))
    else:
        actions = torch.as_tensor(rng.normal(size=(T, N, 2)), dtype=torch.float32)
    return TaskBatch(
        task=task,
        obs=torch.as_tensor(obs, dtype=torch.float32),
        actions=actions,
        behaviour_logp=torch.zeros(T, N),
        rewards=torch.as_tensor(rng.normal(size=(T, N)), dtype=torch.float32),
        terminated=torch.zeros(T, N, dtype=torch.bool),
        truncated=torch.zeros(T, N, dtype=torch.bool),
        valid=torch.ones(T, N, dtype=torch.bool),
        policy_version=0,
    )


def _update(learner: SacLearner, rng: np.random.Generator) -> dict[str, float]:
    """One update with an unroll of every task: :data:`STEPS` gradient steps (its noise from
    torch's generator seeded by ``rng``, so that twins on equal ``rng`` draw alike)."""
    torch.manual_seed(int(rng.integers(2**31)))
    before = learner.gradient_steps
    metrics = learner.update([_batch(k, rng) for k in range(len(TASKS))])
    assert learner.gradient_steps == before + STEPS
    return metrics


def _trained(learner: SacLearner) -> dict[str, torch.Tensor]:
    """The parameters SAC trains (not the model's unused state value), by name."""
    out = {f"model.{n}": p for n, p in learner.model.named_parameters() if "value_" not in n}
    return out | {f"critic.{n}": p for n, p in learner.critic.named_parameters()}


def _state_tensors(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]


def _gram(w: torch.Tensor) -> torch.Tensor:
    """``W Wᵀ`` or ``Wᵀ W``, whichever is the smaller: ``gain² I`` for an orthogonal init."""
    return w @ w.t() if w.shape[0] <= w.shape[1] else w.t() @ w


def _linears(learner: SacLearner) -> dict[str, nn.Linear]:
    nets = {"model": learner.model, "critic": learner.critic}
    return {
        f"{k}.{n}": m
        for k, net in nets.items()
        for n, m in net.named_modules()
        if isinstance(m, nn.Linear)
    }


@pytest.mark.parametrize("stacked", [False, True])
@pytest.mark.parametrize("what", ["all", "networks"])
def test_a_reset_reinitialises_the_networks_at_its_step_and_keeps_the_replay(
    stacked: bool, what: str
) -> None:
    # Twins on the same data and seed, one resetting after gradient step 48: equal until then.
    learner = _learner(f", reset_every: {2 * STEPS}, reset: {what}", stacked)
    twin = _learner("", stacked)
    rng, twin_rng = np.random.default_rng(1), np.random.default_rng(1)
    first = _update(learner, rng)
    _update(twin, twin_rng)
    assert first["sac/resets"] == 0.0
    assert "sac/resets" not in _update(_learner(), np.random.default_rng(2))  # no schedule
    for opt in (learner.actor_opt, learner.critic_opt):  # not reset before its step
        assert all(float(s["step"]) == STEPS for s in opt.state.values())
    for name, p in _trained(learner).items():
        assert torch.equal(p, _trained(twin)[name]), name
    second = _update(learner, rng)
    _update(twin, twin_rng)
    assert second["sac/resets"] == 1.0

    # Every network parameter re-drawn: unlike the twin's, with the layer's built gain
    # (a fresh learner's) and zero biases.
    for name, p in _trained(learner).items():
        assert not torch.equal(p, _trained(twin)[name]), name
    fresh = _linears(_learner(seed=7))
    for name, layer in _linears(learner).items():
        gram = _gram(layer.weight.detach())
        gain2 = _gram(fresh[name].weight.detach()).diagonal().mean()
        assert torch.allclose(gram, gain2 * torch.eye(len(gram)), atol=1e-5 * max(1, gain2)), name
        if layer.bias is not None:
            assert torch.equal(layer.bias, torch.zeros_like(layer.bias)), name
    target = learner.target.state_dict()
    assert all(torch.equal(v, target[k]) for k, v in learner.critic.state_dict().items())
    cleared = [learner.actor_opt, learner.critic_opt]
    cleared += [learner.alpha_opt] if what == "all" else []
    for opt in cleared:
        assert opt.state and all(not v.any() for v in _state_tensors(opt))
    if what == "all":
        assert torch.allclose(learner.log_alpha, torch.zeros(3))  # initial_alpha: 1
    else:
        assert torch.equal(learner.log_alpha, twin.log_alpha)
        assert all(v.any() for v in _state_tensors(learner.alpha_opt) if v.ndim == 0)

    # Kept: the replay, the batch mix, the carry, the counters; the version goes up as ever.
    for mine, theirs in zip(learner.replays, twin.replays, strict=True):
        assert mine.sampler.count == theirs.sampler.count == 2 * T * N
        for key, array in mine.storage.arrays.items():
            assert np.array_equal(array, theirs.storage.arrays[key]), key
    assert np.array_equal(learner.mix.weighted, twin.mix.weighted)
    assert learner.ratio.carry == twin.ratio.carry
    assert (
        (learner.gradient_steps, learner.version)
        == (twin.gradient_steps, twin.version)
        == (
            2 * STEPS,
            2,
        )
    )

    # Training goes on from the fresh networks: the optimisers step the live parameters, which
    # the actors' modules (the stacks' aliases in the stacked step) see.
    reset = {name: p.detach().clone() for name, p in _trained(learner).items()}
    assert _update(learner, rng)["sac/resets"] == 1.0  # the next reset is at step 96
    moved = [n for n, p in _trained(learner).items() if not torch.equal(p, reset[n])]
    assert {n.split(".")[0] for n in moved} == {"model", "critic"}
    assert all(float(s["step"]) == STEPS for s in learner.critic_opt.state.values())


def test_the_stacked_steps_modules_still_alias_its_stacks_after_a_reset() -> None:
    learner = _learner(f", reset_every: {STEPS}", stacked=True)
    _update(learner, np.random.default_rng(1))
    assert learner.stacked is not None
    policy_head = learner.stacked.policy.heads[0]
    critic_head = learner.stacked.critic.heads[0]
    mean = learner.model.policy_heads[0].mean.weight  # task a's, as the actors act with it
    bias = learner.critic.q1.heads[0].bias  # critic 1's head of task a
    was = mean.detach().clone(), bias.detach().clone()
    with torch.no_grad():
        policy_head.weight[0].add_(1.0)  # task a's head: its mean and log-std layers
        critic_head.bias[0].add_(1.0)
    assert torch.equal(mean, was[0] + 1.0)
    assert torch.equal(bias, was[1] + 1.0)
    assert torch.equal(mean, policy_head.weight[0, :, : mean.shape[0]].t())


@pytest.mark.parametrize("what", ["all", "networks"])
def test_famos_task_logits_are_reset_with_the_temperatures(what: str) -> None:
    learner = _learner(f", reset_every: {STEPS}, reset: {what}", multitask="{loss_weighting: famo}")
    assert learner.famo is not None
    _update(learner, np.random.default_rng(1))
    logits, state = learner.famo.logits, _state_tensors(learner.famo.opt)
    assert state and (not logits.any() and not any(v.any() for v in state)) is (what == "all")


def test_a_checkpoint_keeps_the_reset_schedule() -> None:
    rng = np.random.default_rng(1)
    sac = f", reset_every: {2 * STEPS}"
    learner = _learner(sac)
    _update(learner, rng)
    buffer = io.BytesIO()
    torch.save(learner.state_dict(), buffer)
    buffer.seek(0)
    resumed = _learner(sac, seed=3)
    resumed.load_state_dict(torch.load(buffer, weights_only=False))
    assert resumed.gradient_steps == STEPS
    assert _update(resumed, rng)["sac/resets"] == 1.0  # at step 48, as the first run would
    assert all(not v.any() for v in _state_tensors(resumed.critic_opt))
    assert _update(resumed, rng)["sac/resets"] == 1.0  # not at 72
    assert all(float(s["step"]) == STEPS for s in resumed.critic_opt.state.values())
    assert _update(resumed, rng)["sac/resets"] == 2.0  # at 96
    assert all(not v.any() for v in _state_tensors(resumed.critic_opt))


def test_a_resolved_config_parses_back_and_a_schedule_of_zero_is_refused() -> None:
    """A resolved config (what a run or a tune trial writes) holds ``reset`` whether or not
    ``reset_every`` is set: it must parse back as it is."""
    pendulum = "tasks: [{env: gymnasium/Pendulum-v1}]\n"
    text = pendulum + "learner:\n  algorithm: sac\n  sac: {reset: networks}\n"
    sac = parse_config(text, "exp.yaml", **get_plugins().config_context()).learner.sac
    assert (sac.reset, sac.reset_every) == ("networks", None)
    with pytest.raises(ConfigError, match="reset_every"):
        parse_config(
            pendulum + "learner: {algorithm: sac, sac: {reset_every: 0}}\n",
            **get_plugins().config_context(),
        )


RUN = """
total_env_steps: 480
tasks: [{env: gymnasium/Pendulum-v1, num_envs: 2}]
actors: {mode: serial}
learner:
  algorithm: sac
  unroll_length: 8
  batch_size: 2
  model: {encoder_dim: 16, torso: [16]}
  sac: {learning_starts: 100, batch_size: 32, replay_ratio: 64, reset_every: 200}
tracking: {console: quiet, csv: false, wandb: {mode: disabled}, final_eval_episodes: 0,
           run_dir: RUNS}
"""


@pytest.mark.timeout(600)
def test_a_short_run_at_two_gradient_steps_per_env_step_resets_and_logs_it(
    tmp_path: Path,
) -> None:
    text = RUN.replace("RUNS", str(tmp_path / "runs"))
    trainer = Trainer(parse_config(text, **get_plugins().config_context()), console=False)
    try:
        result = trainer.run()
        learner = trainer.learner
    finally:
        trainer.close()
    # 480 env steps in updates of 32, the first 3 before the replay holds 100: 2 gradient
    # steps for each env step after.
    assert learner.gradient_steps >= 2 * (480 - 128)
    assert result.run_dir is not None
    records = [json.loads(x) for x in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = [r["sac/resets"] for r in records if "sac/resets" in r]
    assert logged[-1] == learner.gradient_steps // 200 >= 3
    assert all(math.isfinite(p.detach().sum().item()) for p in learner.critic.parameters())
