"""Per-task step sizes (mtrl.learner.optim): why a task's loss weight cannot set how fast its
own parameters move under Adam, and how ``learning_rate_scale`` does."""

from __future__ import annotations

import copy
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.algorithms.impala.sharding import merge_optimizer_states, select_optimizer_state
from mtrl.config import LearnerConfig, parse_config
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.learner.optim import adam_step, clear_grads, param_groups
from mtrl.learner.synthetic import random_task_batch
from mtrl.train.trainer import Trainer

SPACES = [
    TaskSpaces(gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2)),
    TaskSpaces(gym.spaces.Box(-1, 1, (5,), np.float32), gym.spaces.Box(-2, 2, (2,), np.float32)),
]


def _learner(lr_scales: list[float] | None = None) -> ImpalaLearner:
    torch.manual_seed(0)
    cfg = LearnerConfig.model_validate(
        {
            "model": {"encoder_dim": 16, "torso": [16]},
            "learning_rate": 1e-3,
            "lr_final_fraction": 0.0,
            "max_grad_norm": 1e9,  # no clip: a clip would rescale every gradient alike
        }
    )
    return ImpalaLearner(MultiTaskModel(SPACES, cfg.model), cfg, ["a", "b"], lr_scales)


def _batches(step: int, weight0: float = 1.0) -> list[TaskBatch]:
    b0, b1 = (random_task_batch(k, SPACES[k], 6, 4, seed=10 * step + k) for k in (0, 1))
    return [dataclasses.replace(b0, loss_weight=weight0), b1]


def _moves(
    learner: ImpalaLearner, weight0: float = 1.0, updates: int = 3
) -> dict[str, torch.Tensor]:
    """How far each parameter moved over ``updates`` updates on the same batches."""
    start = {n: p.detach().clone() for n, p in learner.model.named_parameters()}
    for step in range(updates):
        learner.update(_batches(step, weight0))
    return {n: p.detach() - start[n] for n, p in learner.model.named_parameters()}


def test_groups_hold_each_parameter_once_with_its_tasks_scale() -> None:
    model = _learner().model
    (one,) = param_groups(model, [1.0, 1.0])
    assert one["lr_scale"] == 1.0 and len(one["params"]) == len(list(model.parameters()))
    shared, fast = param_groups(model, [2.0, 1.0])
    assert fast["lr_scale"] == 2.0 and shared["lr_scale"] == 1.0
    assert {id(p) for p in fast["params"]} == {id(p) for p in model.task_parameters(0)}
    ids = [id(p) for g in (shared, fast) for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters())  # each exactly once
    torso = {id(p) for p in model.torso.parameters()} | {id(model.value_weight)}
    assert torso <= {id(p) for p in shared["params"]}


def test_a_tasks_weight_cannot_speed_its_own_parameters_under_adam_but_its_scale_does() -> None:
    plain = _moves(_learner())
    weighted = _moves(_learner(), weight0=4.0)
    scaled = _moves(_learner([2.0, 1.0]))
    own = [n for n in plain if n.startswith(("encoders.0.", "policy_heads.0."))]
    assert own
    for n in own:
        # Four times the loss: four times the gradient AND its running size — about the same
        # step (Adam's eps makes it differ only where gradients are tiny).
        assert 0.9 < weighted[n].norm() / plain[n].norm() < 1.1, n
        assert (weighted[n] - plain[n]).norm() < 0.25 * plain[n].norm(), n
        assert plain[n].abs().max() > 1e-4, n
    # The scale doubles the first update's step of task 0's own parameters exactly; later
    # steps start from elsewhere, so compare their size.
    first_plain, first_scaled = (
        _moves(_learner(), updates=1),
        _moves(_learner([2.0, 1.0]), updates=1),
    )
    for n in own:
        torch.testing.assert_close(first_scaled[n], 2 * first_plain[n], rtol=1e-4, atol=1e-7)
        ratio = scaled[n].norm() / plain[n].norm()
        assert 1.8 < ratio < 2.2, (n, float(ratio))
    # The shared torso and value head, and the other task's encoder: the plain step.
    for n in ("torso.0.weight", "encoders.1.mlp.0.weight", "value_weight"):
        torch.testing.assert_close(first_scaled[n], first_plain[n], rtol=1e-4, atol=1e-7)


def test_the_schedule_sets_every_group_and_the_scales_survive_a_checkpoint() -> None:
    learner = _learner([0.5, 3.0])
    learner.set_progress(0.5)
    lrs = {g["lr_scale"]: g["lr"] for g in learner.optimizer.param_groups}
    assert lrs == pytest.approx({1.0: 5e-4, 0.5: 2.5e-4, 3.0: 1.5e-3})
    assert learner.update(_batches(0))["charts/learning_rate"] == pytest.approx(5e-4)
    state = copy.deepcopy(learner.state_dict())  # as through a file: it holds live tensors
    fresh = _learner([0.5, 3.0])
    fresh.load_state_dict(state)
    assert [g["lr_scale"] for g in fresh.optimizer.param_groups] == [1.0, 0.5, 3.0]
    learner.update(_batches(1))
    fresh.update(_batches(1))
    for (n, a), b in zip(learner.model.named_parameters(), fresh.model.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=0, msg=n)


def test_a_tasks_learning_rate_scale_reaches_the_trainers_optimiser() -> None:
    cfg = parse_config(
        """
        name: scaled
        total_env_steps: 1000
        actors: {mode: serial}
        tasks:
          - {env: gymnasium/CartPole-v1, num_envs: 2, learning_rate_scale: 3}
          - {env: gymnasium/Acrobot-v1, num_envs: 2}
        tracking: {console: quiet, wandb: {mode: disabled}}
        checkpoint: {enabled: false}
        """
    )
    trainer = Trainer(cfg, write_run_dir=False, console=False)
    try:
        groups = trainer.learner.optimizer.param_groups
        (fast,) = [g for g in groups if g["lr_scale"] == 3.0]
        own = {id(p) for p in trainer.model.task_parameters(0)}
        assert {id(p) for p in fast["params"]} == own
        assert fast["lr"] == pytest.approx(3 * cfg.learner.learning_rate)
    finally:
        trainer.close()


def test_task_sharded_ranks_optimiser_states_merge_by_scale_and_split_back() -> None:
    """Rank 0 holds the shared group and scale 2's, rank 1 the shared group and scale 0.5's:
    the merged state has each group once, in param_groups' order, and each rank gets back
    exactly its own groups."""
    rank0 = {
        "state": {"torso.w": 1, "enc.0.w": 2},
        "param_groups": [
            {"lr_scale": 1.0, "lr": 1e-3, "params": ["torso.w"]},
            {"lr_scale": 2.0, "lr": 2e-3, "params": ["enc.0.w"]},
        ],
    }
    rank1 = {
        "state": {"torso.w": 1, "enc.1.w": 3},
        "param_groups": [
            {"lr_scale": 1.0, "lr": 1e-3, "params": ["torso.w"]},
            {"lr_scale": 0.5, "lr": 5e-4, "params": ["enc.1.w"]},
        ],
    }
    merged = merge_optimizer_states([rank0, rank1])
    assert [(g["lr_scale"], g["params"]) for g in merged["param_groups"]] == [
        (1.0, ["torso.w"]),
        (0.5, ["enc.1.w"]),
        (2.0, ["enc.0.w"]),
    ]
    assert merged["state"] == {"torso.w": 1, "enc.0.w": 2, "enc.1.w": 3}
    for part in (rank0, rank1):
        names = set(part["state"])
        assert select_optimizer_state(merged, names) == part


def test_adam_runs_fused_on_plain_tensors_and_steps_as_the_unfused_one() -> None:
    """Fused Adam (one kernel for every parameter) takes the same steps as the per-tensor loop
    it replaces; FUSED_ADAM off gives the loop, and RMSProp is left as it is."""
    from mtrl.learner import optim

    fused = _learner()
    assert fused.optimizer.defaults["fused"] is True
    try:
        optim.FUSED_ADAM = False
        plain = _learner()
    finally:
        optim.FUSED_ADAM = True
    assert not plain.optimizer.defaults["fused"]
    for step in range(3):
        batches = [random_task_batch(k, s, 8, 4, seed=10 * step + k) for k, s in enumerate(SPACES)]
        fused.update(batches)
        plain.update(batches)
    for (name, a), b in zip(fused.model.named_parameters(), plain.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    rms = LearnerConfig.model_validate({"optimizer": "rmsprop"})
    assert not optim.make_optimizer(fused.model.parameters(), rms).defaults.get("fused")


@pytest.mark.parametrize(
    ("saved_scales", "loaded_scales"),
    [([1.0, 1.0], [0.5, 2.0]), ([0.5, 2.0], [2.0, 0.5]), ([0.5, 2.0], None)],
)
def test_an_optimiser_state_loads_into_other_per_task_scales_parameter_by_parameter(
    saved_scales: list[float], loaded_scales: list[float] | None
) -> None:
    """A member of population-based training copies a member that scaled its tasks' step
    sizes otherwise: the groups differ (in number, or in which parameters they hold), and each
    parameter must still get its own Adam moments (a positional load refused, or mixed them)."""
    source = _learner(saved_scales)
    for step in range(2):
        source.update([random_task_batch(k, s, 8, 4, seed=step + k) for k, s in enumerate(SPACES)])
    target = _learner(loaded_scales)
    target.load_state_dict(source.state_dict())
    moments = {id(p): st for p, st in source.optimizer.state.items()}
    by_name = dict(source.model.named_parameters())
    for name, p in target.model.named_parameters():
        mine = target.optimizer.state[p]
        theirs = moments[id(by_name[name])]
        torch.testing.assert_close(mine["exp_avg"], theirs["exp_avg"], msg=name)
        torch.testing.assert_close(mine["exp_avg_sq"], theirs["exp_avg_sq"], msg=name)
    scales = sorted(g["lr_scale"] for g in target.optimizer.param_groups)
    assert scales == sorted({1.0, *(loaded_scales or [])})
    target.update([random_task_batch(k, s, 8, 4, seed=9 + k) for k, s in enumerate(SPACES)])


def _two_adams() -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter], list, list]:
    torch.manual_seed(0)
    a = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(3))]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    groups = [{"params": [a[0]], "lr": 1e-2}, {"params": [a[1]], "lr": 3e-3, "weight_decay": 0.1}]
    twin = [{"params": [b[0]], "lr": 1e-2}, {"params": [b[1]], "lr": 3e-3, "weight_decay": 0.1}]
    return a, b, groups, twin


def test_a_direct_fused_adam_step_is_the_optimisers_own_step() -> None:
    """adam_step calls the fused kernel itself (after the first step has made the state) and
    ends where Adam's own step ends, parameters and moments, a parameter without a gradient
    left alone; clear_grads clears like zero_grad(set_to_none=True)."""
    a, b, groups, twin = _two_adams()
    mine = torch.optim.Adam(groups, fused=True)
    theirs = torch.optim.Adam(twin, fused=True)
    for step in range(5):
        for params, opt in ((a, mine), (b, theirs)):
            if opt is mine:
                clear_grads(opt)
            else:
                opt.zero_grad(set_to_none=True)
            assert all(p.grad is None for p in params)
            loss = (params[0].sum(0) * params[1]).square().sum()
            if step == 3:  # the bias sits this one out
                loss = params[0].square().sum()
            loss.backward()
        adam_step(mine)
        theirs.step()
        for p, q in zip(a, b, strict=True):
            torch.testing.assert_close(p, q, rtol=0, atol=1e-7)
            sp, sq = mine.state[p], theirs.state[q]
            for key in ("step", "exp_avg", "exp_avg_sq"):
                torch.testing.assert_close(sp[key], sq[key], rtol=0, atol=1e-7)


def test_adam_step_leaves_what_it_cannot_take_to_the_optimiser() -> None:
    """An unfused Adam (or another optimiser) steps through its own step()."""
    a, b, groups, twin = _two_adams()
    mine, theirs = torch.optim.Adam(groups, fused=False), torch.optim.Adam(twin, fused=False)
    for params in (a, b):
        (params[0].sum() + params[1].sum()).backward()
    adam_step(mine)
    theirs.step()
    for p, q in zip(a, b, strict=True):
        torch.testing.assert_close(p, q)
