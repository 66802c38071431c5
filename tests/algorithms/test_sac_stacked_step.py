"""SAC's stacked gradient step is the per-task step's math: one step of each from the same
parameters, batch and noise ends at the same parameters, temperatures, losses, diagnostics and
priorities (to float rounding), with uniform and prioritized replay, combined task gradients, a
task-conditioned torso, one task and uneven task counts; the per-task modules the actors use
alias the stacks; learners whose tasks cannot stack keep the per-task step and say why."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.algorithms.feed import batch_to_unroll
from mtrl.algorithms.sac import SacLearner, make_sac_learner, stacked_step
from mtrl.config import parse_config
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel, TaskSpaces

OBS, ACT, T = 5, 2, 8
BOX = TaskSpaces(spaces.Box(-4, 4, (OBS,), np.float32), spaces.Box(-1, 1, (ACT,), np.float32))


def _learner(k: int, stacked: bool, sac: str = "", model: str = "", **over: str) -> SacLearner:
    cfg = parse_config(
        "tasks: [{env: a/b}]\n"
        f"learner: {{algorithm: sac, unroll_length: {T}, "
        f"model: {{encoder_dim: 16, torso: [16, 16] {model}}}, "
        f"multitask: {{gradients: {over.get('gradients', 'sum')}}}, "
        f"sac: {{replay_ratio: 4, batch_size: 24, learning_starts: 1 {sac}}}}}\n"
    )
    torch.manual_seed(0)
    net = MultiTaskModel([BOX] * k, cfg.learner.model)
    before = stacked_step.ENABLED
    stacked_step.ENABLED = stacked
    try:
        return make_sac_learner(net, cfg.learner, [f"t{i}" for i in range(k)])
    finally:
        stacked_step.ENABLED = before


def _batch(task: int, rng: np.random.Generator) -> TaskBatch:
    n = 3
    terminated = torch.zeros(T, n, dtype=torch.bool)
    terminated[2, 0] = True
    return TaskBatch(
        task=task,
        obs=torch.as_tensor(rng.normal(size=(T + 1, n, OBS)), dtype=torch.float32),
        actions=torch.as_tensor(rng.normal(size=(T, n, ACT)), dtype=torch.float32),
        behaviour_logp=torch.zeros(T, n),
        rewards=torch.as_tensor(rng.normal(size=(T, n)), dtype=torch.float32),
        terminated=terminated,
        truncated=torch.zeros(T, n, dtype=torch.bool),
        valid=torch.ones(T, n, dtype=torch.bool),
        policy_version=0,
    )


def _fill(learner: SacLearner, k: int) -> None:
    """The same transitions in every task's replay of ``learner``, no gradient step yet."""
    rng = np.random.default_rng(3)
    for task in range(k):
        learner.replays[task].add_unroll(batch_to_unroll(_batch(task, rng)))


def _noise_table(counts: list[int]) -> list[list[torch.Tensor]]:
    """Two draws (next observations, then observations) of per-row noise, task by task."""
    g = torch.Generator().manual_seed(11)
    return [[torch.randn(n, ACT, generator=g) for n in counts] for _ in range(2)]


def _step(learner: SacLearner, counts: list[int]) -> torch.Tensor:
    """One gradient step over every task with ``counts`` rows each and fixed noise."""
    k = len(counts)
    draws = iter(_noise_table(counts))

    def noise(mean: torch.Tensor) -> torch.Tensor:
        if mean.ndim == 2:  # the per-task step: each draw's rows task by task
            return torch.cat(next(draws))
        # the stacked step: both draws at once, [K, 2m, a] (next observations, observations)
        out, m = torch.zeros_like(mean), mean.shape[1] // 2
        for half, rows in enumerate(draws):
            for task, r in enumerate(rows):
                out[task, half * m : half * m + len(r)] = r
        return out

    learner._noise_like = noise  # type: ignore[method-assign]
    learner.mix.split = lambda *_: np.asarray(counts)  # type: ignore[method-assign]
    learner.rng = np.random.default_rng(5)
    return learner._gradient_step(list(range(k)))


def _same(a: SacLearner, b: SacLearner, tol: float = 2e-5) -> None:
    for name in ("model", "critic", "target"):
        sa, sb = getattr(a, name).state_dict(), getattr(b, name).state_dict()
        assert sa.keys() == sb.keys()
        for key in sa:
            torch.testing.assert_close(sa[key], sb[key], atol=tol, rtol=tol, msg=f"{name}.{key}")
    torch.testing.assert_close(a.log_alpha, b.log_alpha, atol=tol, rtol=tol)


CASES = {
    "uniform": ({}, [8, 8, 8]),
    "uneven counts": ({}, [11, 2, 11]),
    "a task absent from the batch": ({}, [12, 0, 12]),
    "one task": ({}, [24]),
    "prioritized": ({"sac": ", prioritized: true"}, [5, 9, 10]),
    "pcgrad": ({"gradients": "pcgrad"}, [8, 8, 8]),
    "cagrad": ({"gradients": "cagrad"}, [6, 8, 10]),
    "moe torso": ({"model": ", torso_mixture: {kind: moe, experts: 2}"}, [8, 8, 8]),
    "clipped": ({"sac": ", max_grad_norm: 0.5"}, [8, 8, 8]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_stacked_step_is_one_per_task_step(case: str) -> None:
    over, counts = CASES[case]
    k = len(counts)
    per_task, stacked = _learner(k, False, **over), _learner(k, True, **over)
    assert per_task.stacked is None and stacked.stacked is not None
    _same(per_task, stacked, tol=0.0)  # the same start
    for learner in (per_task, stacked):
        _fill(learner, k)
    for _ in range(3):  # three steps: the optimisers' moments take part too
        a, b = _step(per_task, counts), _step(stacked, counts)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    _same(per_task, stacked)
    da, db = per_task.pop_diagnostics(), stacked.pop_diagnostics()
    assert da.keys() == db.keys()
    for key in da:
        assert da[key] == pytest.approx(db[key], rel=1e-4, abs=1e-5), key
    if "prioritized" in case:
        for ra, rb in zip(per_task.replays, stacked.replays, strict=True):
            np.testing.assert_allclose(ra.sampler.tree.leaves, rb.sampler.tree.leaves, rtol=1e-4)


def test_the_actors_modules_are_views_of_the_stacks() -> None:
    learner = _learner(3, True)
    _fill(learner, 3)
    before = learner.model.encoders[1].mlp[0].weight.detach().clone()
    _step(learner, [8, 8, 8])
    layer = learner.model.encoders[1].mlp[0].weight
    assert not torch.equal(layer, before)
    torch.testing.assert_close(layer, learner.stacked.encoders.linears[0].weight[1])
    # A checkpoint loaded into the modules is what the stacks compute with.
    other = _learner(3, True)
    other.load_state_dict(learner.state_dict())
    torch.testing.assert_close(
        other.stacked.encoders.linears[0].weight, learner.stacked.encoders.linears[0].weight
    )
    torch.testing.assert_close(
        other.stacked.target.heads.weight, learner.stacked.target.heads.weight
    )


@pytest.mark.parametrize(
    ("tasks", "why"),
    [
        ([BOX, TaskSpaces(BOX.observation_space, spaces.Discrete(3))], "a Discrete task"),
        (
            [BOX, TaskSpaces(spaces.Box(-1, 1, (OBS + 1,), np.float32), BOX.action_space)],
            "observations of several shapes",
        ),
        (
            [BOX, TaskSpaces(spaces.Box(0, 9, (OBS,), np.int64), BOX.action_space)],
            "an encoder that is not a float vector MLP",
        ),
    ],
)
def test_tasks_that_cannot_stack_keep_the_per_task_step(tasks: list, why: str) -> None:
    cfg = parse_config(
        "tasks: [{env: a/b}]\nlearner: {algorithm: sac, model: {encoder_dim: 8, torso: [8]}}\n"
    )
    learner = make_sac_learner(MultiTaskModel(tasks, cfg.learner.model), cfg.learner, ["a", "b"])
    assert learner.stacked is None
    assert stacked_step.why_not(learner, None) == why


def test_per_task_step_sizes_keep_the_per_task_step() -> None:
    cfg = parse_config("tasks: [{env: a/b}]\nlearner: {algorithm: sac}\n")
    model = MultiTaskModel([BOX, BOX], cfg.learner.model)
    learner = make_sac_learner(model, cfg.learner, ["a", "b"], lr_scales=[1.0, 2.0])
    assert learner.stacked is None
