"""SAC's batches drawn on the learner's device from a mirror of the replay
(``learner.sac.draw_on_device``): the mirror holds what the host replay holds, through the ring's
wrap and a checkpoint; every drawn row is a stored transition of its own task, the draw is uniform
over the sampleable items (never a reset step), rows past a task's count are masked; a run trains
and resumes with it; where it cannot be used the batches stay on the host and a forced request
says why. The step itself is the stacked step (tests/algorithms/test_sac_stacked_step.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from mtrl.algorithms.sac import SacLearner
from mtrl.algorithms.sac.device_replay import DeviceReplay
from mtrl.config import parse_config
from mtrl.plugins import get_plugins
from mtrl.train.trainer import Trainer
from tests.algorithms.test_sac_stacked_step import BOX, DISCRETE, IMAGE, MIXED, T, _batch, _learner

ON = ", draw_on_device: true"
SMALL = "capacity: 48"  # the replay section: 6 segments of T = 8 per task


def _mirror(learner: SacLearner) -> DeviceReplay:
    assert learner.stacked is not None and learner.stacked.replay is not None
    return learner.stacked.replay


def _updates(learner: SacLearner, n: int, seed: int = 0) -> None:
    """``n`` updates of one 3-column unroll per task (training as they go)."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        batches = [_batch(k, s, rng) for k, s in enumerate(learner.model.spaces)]
        for b in batches:  # a reset step in every unroll: stored, never drawn
            b.valid[5, 1] = False
        learner.update(batches)


def _assert_mirrors_host(learner: SacLearner) -> None:
    mirror = _mirror(learner)
    for task, (gi, i) in mirror.where.items():
        replay, m = learner.replays[task], mirror.mirrors[gi]
        for name, dst in m.fields.items():
            assert np.array_equal(dst[i].cpu().numpy(), replay.storage.arrays[name]), (task, name)
        live = replay.sampler.state_dict()["live"]
        assert torch.equal(m.live[i].cpu(), live.cpu()), task
        assert int(m.cum[i, -1]) == replay.sampler.count


def test_the_mirror_holds_the_host_replay_through_the_rings_wrap() -> None:
    learner = _learner(MIXED, True, sac=ON, replay=SMALL)
    _updates(learner, 5)  # 15 segments into rings of 6: wrapped twice
    assert learner.gradient_steps > 0
    assert all(r.storage.segments_added == 15 for r in learner.replays)
    _assert_mirrors_host(learner)


def test_every_drawn_row_is_a_stored_transition_of_its_task() -> None:
    learner = _learner(MIXED, True, sac=ON, replay=SMALL)
    _updates(learner, 4)
    mirror = _mirror(learner)
    counts = torch.tensor([5.0, 0.0, 3.0, 6.0, 1.0, 6.0, 2.0])
    rows = [6] * len(mirror.groups)
    batches, items = mirror.draw(counts, rows)
    for g, b, drawn in zip(mirror.groups, batches, items, strict=True):
        for i, task in enumerate(g.tasks):
            replay = learner.replays[task]
            idx = drawn[i].numpy()
            live = replay.sampler.state_dict()["live"].numpy()
            assert live[idx].all(), task  # never a reset step, never an empty slot
            want = replay.storage.get(idx)
            n = len(idx)
            assert np.array_equal(b.obs[i].numpy(), want.obs.reshape(n, -1).astype(np.float32))
            assert np.array_equal(
                b.next_obs[i].numpy(), want.next_obs.reshape(n, -1).astype(np.float32)
            )
            got = b.actions[i].numpy()
            assert np.array_equal(got, want.actions.reshape(got.shape).astype(got.dtype))
            assert np.array_equal(b.rewards[i].numpy(), want.rewards)
            assert np.array_equal(b.terminated[i].numpy(), want.terminated.astype(np.float32))
            mask = (np.arange(6) < counts[task].item()).astype(np.float32)
            assert np.array_equal(b.mask[i].numpy(), mask) and torch.equal(b.weights[i], b.mask[i])


def test_the_draw_is_uniform_over_the_sampleable_items() -> None:
    learner = _learner([BOX, BOX], True, sac=ON, replay=SMALL)
    _updates(learner, 3)  # 9 segments into 6: the ring wrapped; a reset step in one column of 3
    mirror = _mirror(learner)
    torch.manual_seed(0)
    hits = [np.zeros(6 * T, np.int64) for _ in range(2)]
    for _ in range(50):
        _, (items,) = mirror.draw(torch.tensor([400.0, 400.0]), [400])
        for k in range(2):
            hits[k] += np.bincount(items[k].numpy(), minlength=6 * T)
    for k in range(2):
        live = learner.replays[k].sampler.state_dict()["live"].numpy()
        assert live.sum() == 6 * T - 2 and hits[k][~live].sum() == 0
        observed = hits[k][live]
        assert stats.chisquare(observed).pvalue > 1e-3, observed  # a fixed seed: not flaky


def test_a_checkpoint_puts_the_replay_back_in_the_mirror() -> None:
    a = _learner([BOX, BOX, DISCRETE, IMAGE], True, sac=ON, replay=SMALL)
    a.cfg._checkpoint_replay = True
    _updates(a, 3)
    state = a.state_dict()
    b = _learner([BOX, BOX, DISCRETE, IMAGE], True, sac=ON, replay=SMALL)
    b.load_state_dict(state)
    _assert_mirrors_host(b)
    torch.manual_seed(3)
    before = _mirror(a).draw(torch.full((4,), 4.0), [4] * len(_mirror(a).groups))[1]
    torch.manual_seed(3)
    after = _mirror(b).draw(torch.full((4,), 4.0), [4] * len(_mirror(b).groups))[1]
    assert all(torch.equal(x, y) for x, y in zip(before, after, strict=True))


@pytest.mark.parametrize(
    ("tasks", "replay", "why"),
    [
        ([BOX, BOX], ", sampler: prioritized", "prioritized replay"),
        # an image's own group and no group of several: the per-task step on a CPU
        ([IMAGE, DISCRETE], "", "per-task step"),
    ],
)
def test_where_the_mirror_cannot_be_used_a_forced_request_says_why(
    tasks: list, replay: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    learner = _learner(tasks, None, sac=ON, replay=SMALL + replay)
    assert learner.stacked is None or learner.stacked.replay is None
    out = capsys.readouterr().out
    assert "draw_on_device is true, but the batches are drawn on the host" in out and why in out


def test_by_default_a_cpu_learner_draws_on_the_host() -> None:
    learner = _learner([BOX, BOX], True)
    assert learner.stacked is not None and learner.stacked.replay is None


RUN = """
total_env_steps: 640
tasks: [{env: gymnasium/Pendulum-v1, num_envs: 2, name: p1},
        {env: gymnasium/Pendulum-v1, num_envs: 2, name: p2}]
actors: {mode: serial}
learner:
  algorithm: sac
  unroll_length: 8
  batch_size: 2
  model: {encoder_dim: 16, torso: [16]}
  sac: {learning_starts: 100, batch_size: 32, replay_ratio: 8, draw_on_device: true}
checkpoint: {replay: true}
tracking: {console: quiet, csv: false, wandb: {mode: disabled}, final_eval_episodes: 0,
           run_dir: RUNS}
"""


def test_a_run_trains_on_device_drawn_batches_and_resumes(tmp_path: Path) -> None:
    plugins = get_plugins()
    cfg = parse_config(
        RUN.replace("RUNS", str(tmp_path / "runs")),
        env_ids=plugins.envs.ids(),
        algorithms=plugins.algorithms.parallel_support(),
    )
    trainer = Trainer(cfg, console=False)
    try:
        result = trainer.run()
        assert _mirror(trainer.learner) is not None
        steps = trainer.learner.gradient_steps
        assert steps > 0
        _assert_mirrors_host(trainer.learner)
    finally:
        trainer.close()
    resumed = Trainer.resume(result.run_dir, console=False, total_env_steps=1280)
    try:
        _assert_mirrors_host(resumed.learner)
        resumed.run()
        assert resumed.learner.gradient_steps > steps
        _assert_mirrors_host(resumed.learner)
    finally:
        resumed.close()
