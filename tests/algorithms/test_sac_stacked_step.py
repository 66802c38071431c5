"""SAC's stacked gradient step is the per-task step's math: one step of each from the same
parameters, batch and noise ends at the same parameters, temperatures, losses, diagnostics and
priorities (to float rounding), with uniform and prioritized replay, combined task gradients,
FAMO's weighted critic losses, a task-conditioned torso, a residual torso, one task and uneven
task counts; the per-task modules the actors use alias the stacks; learners whose tasks cannot
stack keep the per-task step and say why."""

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
#: Spaces the stacked step groups otherwise: another observation size, Discrete actions, an
#: image (a conv encoder: a group of its own), scaled integers (likewise).
OTHER = TaskSpaces(spaces.Box(-4, 4, (3,), np.float32), spaces.Box(-2, 2, (ACT,), np.float32))
DISCRETE = TaskSpaces(spaces.Box(-4, 4, (4,), np.float32), spaces.Discrete(3))
IMAGE = TaskSpaces(spaces.Box(0, 255, (2, 8, 8), np.uint8), spaces.Discrete(2))
INTS = TaskSpaces(spaces.Box(0, 9, (OBS,), np.int64), spaces.Box(-1, 1, (ACT,), np.float32))
MIXED = [BOX, OTHER, DISCRETE, DISCRETE, IMAGE, INTS, BOX]


def _learner(
    tasks: list[TaskSpaces],
    stacked: bool | None,
    sac: str = "",
    model: str = "",
    replay: str = "",
    **over: str,
) -> SacLearner:
    """``sac``, ``model``: more keys of those sections (each after a comma); ``replay``: the
    ``replay:`` section's keys; ``over``: ``gradients`` and ``loss_weighting`` of
    ``learner.multitask``."""
    cfg = parse_config(
        "tasks: [{env: a/b}]\n"
        f"learner: {{algorithm: sac, unroll_length: {T}, "
        f"model: {{encoder_dim: 16, torso: [16, 16] {model}}}, "
        f"multitask: {{gradients: {over.get('gradients', 'sum')}, "
        f"loss_weighting: {over.get('loss_weighting', 'none')}}}, "
        f"sac: {{replay_ratio: 4, batch_size: 24, learning_starts: 1 {sac}}}}}\n"
        f"replay: {{{replay}}}\n"
    )
    torch.manual_seed(0)
    net = MultiTaskModel(tasks, cfg.learner.model)
    before = stacked_step.ENABLED
    stacked_step.ENABLED = stacked
    try:
        return make_sac_learner(net, cfg.learner, [f"t{i}" for i in range(len(tasks))])
    finally:
        stacked_step.ENABLED = before


def _sample(space: spaces.Space, shape: tuple[int, ...], rng: np.random.Generator) -> torch.Tensor:
    if isinstance(space, spaces.Discrete):
        return torch.as_tensor(rng.integers(0, int(space.n), shape))
    if np.issubdtype(space.dtype, np.integer):
        high = int(np.max(space.high))
        return torch.as_tensor(
            rng.integers(0, high + 1, (*shape, *space.shape)).astype(space.dtype)
        )
    return torch.as_tensor(rng.normal(size=(*shape, *space.shape)), dtype=torch.float32)


def _batch(task: int, space: TaskSpaces, rng: np.random.Generator) -> TaskBatch:
    n = 3
    terminated = torch.zeros(T, n, dtype=torch.bool)
    terminated[2, 0] = True
    return TaskBatch(
        task=task,
        obs=_sample(space.observation_space, (T + 1, n), rng),
        actions=_sample(space.action_space, (T, n), rng),
        behaviour_logp=torch.zeros(T, n),
        rewards=torch.as_tensor(rng.normal(size=(T, n)), dtype=torch.float32),
        terminated=terminated,
        truncated=torch.zeros(T, n, dtype=torch.bool),
        valid=torch.ones(T, n, dtype=torch.bool),
        policy_version=0,
    )


def _fill(learner: SacLearner) -> None:
    """The same transitions in every task's replay of ``learner``, no gradient step yet."""
    rng = np.random.default_rng(3)
    for task, space in enumerate(learner.model.spaces):
        unroll = batch_to_unroll(_batch(task, space, rng))
        learner.replays[task].add_unroll(unroll)
        if learner.obs_norm is not None:  # statistics away from (0, 1): they take part
            unroll.obs[:] = unroll.obs * (task + 2) + task
            learner.obs_norm.observe(task, unroll.obs)


def _noise_table(counts: list[int]) -> list[list[torch.Tensor]]:
    """Two draws (next observations, then observations) of per-row noise, task by task."""
    g = torch.Generator().manual_seed(11)
    return [[torch.randn(n, ACT, generator=g) for n in counts] for _ in range(2)]


def _step(learner: SacLearner, counts: list[int], noise: bool = True) -> torch.Tensor:
    """One gradient step over every task with ``counts`` rows each, with fixed noise for a
    single group of Box tasks (else zero noise: the per-task step and the stacked one draw
    their noise for differently grouped rows)."""
    draws = iter(_noise_table(counts))

    def fixed(mean: torch.Tensor) -> torch.Tensor:
        rows = next(draws)
        if mean.ndim == 2:  # the per-task step: the rows task by task
            return torch.cat(rows)
        out = torch.zeros_like(mean)  # the stacked step: [K, m, a], padding after each task's
        for task, r in enumerate(rows):
            out[task, : len(r)] = r
        return out

    learner._noise_like = fixed if noise else torch.zeros_like  # type: ignore[method-assign]
    learner.mix.split = lambda *_: np.asarray(counts)  # type: ignore[method-assign]
    learner.rng = np.random.default_rng(5)
    return learner._gradient_step(list(range(len(counts))))


def _same(a: SacLearner, b: SacLearner, tol: float = 2e-5) -> None:
    for name in ("model", "critic", "target"):
        sa, sb = getattr(a, name).state_dict(), getattr(b, name).state_dict()
        assert sa.keys() == sb.keys()
        for key in sa:
            torch.testing.assert_close(sa[key], sb[key], atol=tol, rtol=tol, msg=f"{name}.{key}")
    torch.testing.assert_close(a.log_alpha, b.log_alpha, atol=tol, rtol=tol)
    if a.famo is not None and b.famo is not None:
        torch.testing.assert_close(a.famo.logits, b.famo.logits, atol=tol, rtol=tol)


CASES = {
    "uniform": ([BOX] * 3, {}, [8, 8, 8]),
    "uneven counts": ([BOX] * 3, {}, [11, 2, 11]),
    "a task absent from the batch": ([BOX] * 3, {}, [12, 0, 12]),
    "one task": ([BOX], {}, [24]),
    "prioritized": ([BOX] * 3, {"replay": "sampler: prioritized"}, [5, 9, 10]),
    "pcgrad": ([BOX] * 3, {"gradients": "pcgrad"}, [8, 8, 8]),
    "cagrad": ([BOX] * 3, {"gradients": "cagrad"}, [6, 8, 10]),
    "moe torso": ([BOX] * 3, {"model": ", torso_mixture: {kind: moe, experts: 2}"}, [8, 8, 8]),
    "clipped": ([BOX] * 3, {"sac": ", max_grad_norm: 0.5"}, [8, 8, 8]),
    "mixed spaces": (MIXED, {}, [4, 3, 4, 2, 4, 4, 3]),
    "mixed, a Discrete task absent": (MIXED, {}, [6, 3, 0, 5, 4, 3, 3]),
    "mixed, prioritized": (MIXED, {"replay": "sampler: prioritized"}, [4, 3, 4, 2, 4, 4, 3]),
    "mixed, cagrad": (MIXED, {"gradients": "cagrad"}, [4, 3, 4, 2, 4, 4, 3]),
    "mixed, soft modular torso": (
        MIXED,
        {"model": ", torso_mixture: {kind: soft_modular}"},
        [4, 3, 4, 2, 4, 4, 3],
    ),
    "famo": ([BOX] * 3, {"loss_weighting": "famo"}, [5, 9, 10]),
    "famo, a task absent": ([BOX] * 3, {"loss_weighting": "famo"}, [12, 0, 12]),
    "mixed, famo": (MIXED, {"loss_weighting": "famo"}, [4, 3, 4, 2, 4, 4, 3]),
    "action after the encoder": ([BOX, BOX], {"sac": ", critic_action: hidden"}, [12, 12]),
    "residual torso": ([BOX] * 3, {"model": ", torso_block: residual"}, [8, 8, 8]),
    "normalized observations": ([BOX] * 3, {"sac": ", normalize_obs: true"}, [11, 2, 11]),
    "mixed, normalized observations, famo": (
        MIXED,
        {"sac": ", normalize_obs: true", "loss_weighting": "famo"},
        [4, 3, 4, 2, 4, 4, 3],
    ),
    "categorical critic": ([BOX] * 3, {"sac": ", critic: categorical, num_bins: 11"}, [5, 9, 10]),
    "mixed, categorical critic, prioritized": (
        MIXED,
        {"sac": ", critic: categorical, v_min: -3, v_max: 4", "replay": "sampler: prioritized"},
        [4, 3, 4, 2, 4, 4, 3],
    ),
    "mixed, categorical critic, normalized observations, famo": (
        MIXED,
        {"sac": ", critic: categorical, normalize_obs: true", "loss_weighting": "famo"},
        [6, 3, 0, 5, 4, 3, 3],
    ),
    "categorical critic, residual torso, cagrad": (
        [BOX] * 3,
        {
            "sac": ", critic: categorical, num_bins: 21, v_min: -2, v_max: 2",
            "model": ", torso_block: residual",
            "gradients": "cagrad",
        },
        [8, 8, 8],
    ),
    "mixed, residual torso, pcgrad": (
        MIXED,
        {"model": ", torso_block: residual", "gradients": "pcgrad"},
        [4, 3, 4, 2, 4, 4, 3],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_stacked_step_is_one_per_task_step(case: str) -> None:
    tasks, over, counts = CASES[case]
    per_task, stacked = _learner(tasks, False, **over), _learner(tasks, True, **over)
    assert per_task.stacked is None and stacked.stacked is not None
    _same(per_task, stacked, tol=0.0)  # the same start
    for learner in (per_task, stacked):
        _fill(learner)
    noise = len(stacked.stacked.groups) == 1 and all(s is BOX for s in tasks)
    for _ in range(3):  # three steps: the optimisers' moments take part too
        a, b = _step(per_task, counts, noise), _step(stacked, counts, noise)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    _same(per_task, stacked)
    if "famo" in case:  # the logits moved, alike in both (compared in _same)
        assert not torch.equal(stacked.famo.logits, torch.zeros_like(stacked.famo.logits))
    da, db = per_task.pop_diagnostics(), stacked.pop_diagnostics()
    assert da.keys() == db.keys()
    for key in da:
        assert da[key] == pytest.approx(db[key], rel=1e-4, abs=1e-5), key
    if "prioritized" in case:
        for ra, rb in zip(per_task.replays, stacked.replays, strict=True):
            np.testing.assert_allclose(ra.sampler.tree.leaves, rb.sampler.tree.leaves, rtol=1e-4)


def test_tasks_are_grouped_by_shape_and_encoders_that_cannot_stack_stand_alone() -> None:
    learner = _learner(MIXED, True)
    groups = [
        (g.tasks, stacked) for g, stacked in zip(*stacked_step.task_groups(learner), strict=True)
    ]
    assert groups == [
        ((0, 6), True),
        ((1,), True),
        ((2, 3), True),
        ((4,), False),  # the image's conv encoder
        ((5,), False),  # integers scaled by their bound
    ]


def test_the_actors_modules_are_views_of_the_stacks() -> None:
    learner = _learner([BOX] * 3, True)
    _fill(learner)
    before = learner.model.encoders[1].mlp[0].weight.detach().clone()
    _step(learner, [8, 8, 8])
    layer = learner.model.encoders[1].mlp[0].weight
    assert not torch.equal(layer, before)
    stacks = learner.stacked
    stack = stacks.policy.encoders[0].linears[0].weight  # [G, in, out]
    torch.testing.assert_close(layer, stack[1].t())
    # A checkpoint loaded into the modules is what the stacks compute with.
    other = _learner([BOX] * 3, True)
    other.load_state_dict(learner.state_dict())
    torch.testing.assert_close(
        other.stacked.policy.encoders[0].linears[0].weight,
        stacks.policy.encoders[0].linears[0].weight,
    )
    torch.testing.assert_close(other.stacked.target.heads[0].weight, stacks.target.heads[0].weight)


@pytest.mark.parametrize(
    ("tasks", "why"),
    [
        (
            [BOX, TaskSpaces(spaces.Dict({"x": BOX.observation_space}), BOX.action_space)],
            "task 1's observation is a Dict",
        ),
        (
            [BOX, TaskSpaces(spaces.Tuple([BOX.observation_space]), spaces.Discrete(2))],
            "task 1's observation is a Tuple",
        ),
        (
            [BOX, TaskSpaces(spaces.Box(0, 2**30, (3,), np.int64), spaces.Discrete(2))],
            "task 1's integer observations reach past float32's exact range",
        ),
    ],
)
def test_tasks_the_stacked_step_cannot_take_keep_the_per_task_step(tasks: list, why: str) -> None:
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


@pytest.mark.parametrize(
    ("tasks", "stacked"),
    [
        ([BOX] * 3, True),  # a group of three
        (MIXED, True),  # groups of two pay for the image's and the integers' own groups
        ([BOX], True),  # one vector task: its critics one ensemble, still fewer calls
        ([OTHER, DISCRETE], True),  # two groups of one, every encoder stacking
        ([IMAGE, DISCRETE], False),  # a conv encoder and no group of several to pay for it
        ([BOX, BOX, IMAGE], True),  # a group of several pays for the image's own group
    ],
)
def test_the_step_a_cpu_takes_by_default(tasks: list, stacked: bool) -> None:
    learner = _learner(tasks, None)
    assert (learner.stacked is not None) is stacked
    assert stacked_step.why_not(learner, None) is None
