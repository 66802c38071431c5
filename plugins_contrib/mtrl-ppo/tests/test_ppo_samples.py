"""A batch of unrolls as PPO's samples: reset steps dropped, rows kept with their own
observation, action and behaviour log-probability, and every row in exactly one minibatch of
each pass."""

from __future__ import annotations

import torch
from mtrl_ppo.samples import from_batch, merge_by_task, minibatches

from mtrl.learner.batch import TaskBatch


def _batch(task: int, t: int, n: int, dict_obs: bool = False) -> TaskBatch:
    ids = torch.arange((t + 1) * n, dtype=torch.float32).reshape(t + 1, n)
    obs = {"x": ids[..., None].repeat(1, 1, 3)} if dict_obs else ids[..., None].repeat(1, 1, 3)
    valid = torch.ones(t, n, dtype=torch.bool)
    valid[1, 0] = False  # a reset step
    return TaskBatch(
        task=task,
        obs=obs,
        actions=ids[:t].long(),
        behaviour_logp=-ids[:t],
        rewards=torch.zeros(t, n),
        terminated=torch.zeros(t, n, dtype=torch.bool),
        truncated=torch.zeros(t, n, dtype=torch.bool),
        valid=valid,
        policy_version=0,
        loss_weight=0.5,
    )


def test_a_batch_becomes_its_valid_steps_each_row_consistent() -> None:
    b = _batch(0, 3, 2)
    adv = torch.arange(6, dtype=torch.float32).reshape(3, 2) + 100
    s = from_batch(b, adv, adv + 1, adv + 2)
    assert len(s) == 5
    step_id = s.actions.float()  # each row's step number t * N + n
    assert 2.0 not in step_id.tolist()  # row t=1, n=0 was a reset step
    assert torch.equal(s.obs[:, 0], step_id)
    assert torch.equal(s.behaviour_logp, -step_id)
    assert torch.equal(s.advantages, step_id + 100)
    assert torch.equal(s.targets, step_id + 101)
    assert torch.equal(s.old_values, step_id + 102)
    assert s.weights.tolist() == [0.5] * 5


def test_every_row_lands_in_exactly_one_minibatch_per_pass() -> None:
    parts = []
    for task, dict_obs in ((0, False), (1, True), (0, False)):
        b = _batch(task, 4, 3, dict_obs)
        z = torch.zeros(4, 3)
        parts.append(from_batch(b, z, z, z))
    merged = merge_by_task(parts)
    assert [p.task for p in merged] == [0, 1]
    assert [len(p) for p in merged] == [22, 11]
    seen: dict[int, list[float]] = {0: [], 1: []}
    batches = list(minibatches(merged, 4, torch.Generator().manual_seed(0)))
    assert len(batches) == 4
    assert [sum(len(p) for p in mb) for mb in batches] == [9, 8, 8, 8]
    for mb in batches:
        for p in mb:
            seen[p.task] += p.actions.float().tolist()
            obs = p.obs["x"] if isinstance(p.obs, dict) else p.obs
            assert torch.equal(obs[:, 0], p.actions.float())
    for task, p in enumerate(merged):
        assert sorted(seen[task]) == sorted(p.actions.float().tolist())
