"""IMPALA with experience replay (``learner.algorithm: impala_replay``): the replayed share of
each update is held, replayed sequences are stored unrolls of the same task with their
behaviour log-probs and the fresh batch's loss weight, the replay goes into checkpoints with
``checkpoint.replay``, its memory is counted, and a run through the trainer learns CartPole."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.algorithms import make_learner
from mtrl.algorithms.impala_replay import REFILL_NOTE, ImpalaReplayLearner
from mtrl.checkpoint import check_plain
from mtrl.config import parse_config
from mtrl.errors import ConfigError
from mtrl.learner.batch import TaskBatch
from mtrl.learner.distributed import DistContext
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.plugins import get_plugins
from mtrl.replay import SequenceStorage, UniformSampler
from mtrl.train import preflight
from mtrl.train.trainer import Trainer

pytestmark = pytest.mark.timeout(600)

VEC = TaskSpaces(spaces.Box(-5, 5, (4,), np.float32), spaces.Discrete(2))
BOX = TaskSpaces(spaces.Box(-8, 8, (3,), np.float32), spaces.Box(-2, 2, (1,), np.float32))
T = 8


def _learner(
    proportion: float, replay: bool = False, section: str = "{capacity: 800}"
) -> ImpalaReplayLearner:
    """``replay``: ``checkpoint.replay``; ``section``: the ``replay:`` section."""
    cfg = parse_config(
        "tasks: [{env: a/b}]\n"
        f"checkpoint: {{replay: {str(replay).lower()}}}\n"
        f"learner: {{algorithm: impala_replay, unroll_length: {T}, "
        "model: {encoder_dim: 16, torso: [16]}, "
        f"impala_replay: {{proportion: {proportion}}}}}\n"
        f"replay: {section}\n"
    )
    torch.manual_seed(0)
    model = MultiTaskModel([VEC, BOX], cfg.learner.model)
    learner = make_learner(get_plugins(), model, cfg.learner, ["vec", "box"], DistContext(), None)
    assert isinstance(learner, ImpalaReplayLearner)
    return learner


def _batch(task: int, n: int, rng: np.random.Generator, weight: float = 1.0) -> TaskBatch:
    dim = 4 if task == 0 else 3
    actions = (
        torch.as_tensor(rng.integers(0, 2, (T, n)))
        if task == 0
        else torch.as_tensor(rng.normal(size=(T, n, 1)), dtype=torch.float32)
    )
    return TaskBatch(
        task=task,
        obs=torch.as_tensor(rng.normal(size=(T + 1, n, dim)), dtype=torch.float32),
        actions=actions,
        behaviour_logp=torch.as_tensor(rng.normal(-0.7, 0.1, (T, n)), dtype=torch.float32),
        rewards=torch.as_tensor(rng.normal(size=(T, n)), dtype=torch.float32),
        terminated=torch.zeros(T, n, dtype=torch.bool),
        truncated=torch.zeros(T, n, dtype=torch.bool),
        valid=torch.ones(T, n, dtype=torch.bool),
        policy_version=0,
        loss_weight=weight,
    )


@pytest.mark.parametrize(("proportion", "per_fresh"), [(0.5, 1.0), (0.75, 3.0), (0.2, 0.25)])
def test_each_update_replays_its_share_of_columns_once_the_replay_can_give_them(
    proportion: float, per_fresh: float
) -> None:
    learner = _learner(proportion)
    rng = np.random.default_rng(0)
    fresh = [_batch(0, 4, rng), _batch(1, 4, rng, weight=2.5)]
    replayed = learner.replayed(fresh)
    want = round(4 * per_fresh)
    if want > 4:  # the replay holds only the 4 sequences just stored: nothing is drawn yet
        assert replayed == []
        for _ in range(3):
            replayed = learner.replayed([_batch(0, 4, rng), _batch(1, 4, rng, weight=2.5)])
    assert [b.task for b in replayed] == [0, 1]
    assert [int(b.valid.shape[1]) for b in replayed] == [want, want]
    assert [b.loss_weight for b in replayed] == [1.0, 2.5], "the fresh batch's loss weight"


def test_replayed_sequences_are_stored_unrolls_with_their_behaviour_log_probs() -> None:
    learner = _learner(0.5)
    rng = np.random.default_rng(1)
    stored = [_batch(0, 4, rng) for _ in range(3)]
    for b in stored:
        learner.replayed([b])
    (again,) = learner.replayed([_batch(0, 4, rng)])
    columns = {
        tuple(np.round(b.obs[:, i].numpy().ravel(), 5)): (b, i) for b in stored for i in range(4)
    }
    for j in range(again.valid.shape[1]):
        key = tuple(np.round(again.obs[:, j].numpy().ravel(), 5))
        if key not in columns:  # the newest batch's own columns may be drawn too
            continue
        b, i = columns[key]
        assert torch.equal(again.behaviour_logp[:, j], b.behaviour_logp[:, i])
        assert torch.equal(again.actions[:, j], b.actions[:, i])
        assert torch.equal(again.rewards[:, j], b.rewards[:, i])


def test_the_update_trains_on_fresh_and_replayed_and_reports_the_share() -> None:
    learner = _learner(0.5)
    rng = np.random.default_rng(2)
    m0 = learner.update([_batch(0, 4, rng), _batch(1, 4, rng)])
    assert m0["impala_replay/replayed_share"] == pytest.approx(0.5)  # 4 stored: 4 drawn
    before = {k: v.clone() for k, v in learner.model.state_dict().items()}
    m1 = learner.update([_batch(0, 2, rng), _batch(1, 6, rng)])
    assert m1["impala_replay/replayed_share"] == pytest.approx(0.5)
    assert learner.version == 2
    changed = [k for k, v in learner.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "the update moved the weights"
    diag = learner.pop_diagnostics()
    assert diag["learner/vec/replay_sequences"] == 6 and diag["learner/box/replay_sequences"] == 10
    assert diag["learner/vec/replayed_sequences"] == 4 + 2


def test_the_replay_is_kept_in_checkpoints_when_asked_and_refilled_when_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    learner = _learner(0.5, replay=True)
    rng = np.random.default_rng(3)
    for _ in range(3):
        learner.update([_batch(0, 4, rng), _batch(1, 4, rng)])
    state = learner.state_dict()
    check_plain(state)
    assert "model" in state and set(state["replay"]) == {0, 1}
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    other = _learner(0.5, replay=True)
    other.load_state_dict(loaded)
    assert other.version == learner.version
    assert other.replays[0].sampler.count == learner.replays[0].sampler.count == 12
    same = _batch(0, 4, rng)
    a, b = learner.replayed([same]), other.replayed([same])
    assert torch.equal(a[0].obs, b[0].obs), "same replay, same generator: the same draws"

    plain = _learner(0.5, replay=False)
    plain.update([_batch(0, 4, rng)])
    assert "replay" not in plain.state_dict()
    fresh = _learner(0.5, replay=False)
    fresh.load_state_dict(plain.state_dict())
    assert REFILL_NOTE in capsys.readouterr().out
    assert fresh.replays[0].sampler.count == 0


def test_the_replay_section_sizes_each_tasks_replay_in_env_steps() -> None:
    """``replay.capacity`` env steps per task are ``capacity / unroll_length`` sequences
    (rounded up), drawn uniformly; null is the rule's own 100,000."""
    for section, sequences in (("{capacity: 800}", 100), ("{capacity: 801}", 101), ("{}", 12_500)):
        learner = _learner(0.5, section=section)
        for replay in learner.replays.values():
            assert replay.storage.capacity == sequences, section
            assert isinstance(replay.sampler, UniformSampler)


def test_prioritized_sampling_is_refused_when_the_learner_is_built() -> None:
    """A config read without the rules' checks (here: no plugins at parse) still meets the
    rule's refusal before anything is allocated."""
    with pytest.raises(ConfigError, match="draws its replayed sequences uniformly"):
        _learner(0.5, section="{sampler: prioritized}")


def test_the_replay_counts_in_the_memory_estimate_and_a_refusal_names_replay_capacity() -> None:
    cfg = parse_config(
        "tasks: [{env: a/b}]\nlearner: {algorithm: impala_replay, unroll_length: 20}\n"
        "replay: {capacity: 1000}\n"
    )
    need = preflight.replay_need(cfg)
    assert need is not None and str(need.blame) == "replay.capacity = 1000"
    want = SequenceStorage.nbytes(50, 20, VEC.observation_space, VEC.action_space)
    assert need.nbytes(VEC.observation_space, VEC.action_space) == want > 50 * 20 * 16
    assert preflight.replay_need(parse_config("tasks: [{env: a/b}]\n")) is None
    default = parse_config("tasks: [{env: a/b}]\nlearner: {algorithm: impala_replay}\n")
    assert str(preflight.replay_need(default).blame) == "replay.capacity = 100000"  # type: ignore[union-attr]
    huge = parse_config(
        "tasks: [{env: a/b}]\nlearner: {algorithm: impala_replay}\n"
        "replay: {capacity: 10000000000000}\n"
    )
    with pytest.raises(preflight.MemoryCheckError) as err:
        preflight.check_memory(huge)
    (line,) = err.value.problems
    assert "replay.capacity = 10000000000000" in line
    assert "; lower replay.capacity" in line and "sac" not in line


def test_a_run_with_replay_learns_cartpole(tmp_path: Path) -> None:
    """Through the trainer with worker actors: CartPole from ~22 (random) to 150 within
    60k env steps (measured 1 seed here: see docs/ALGORITHMS.md for the seeds' figures)."""
    plugins = get_plugins()
    cfg = parse_config(
        f"""
seed: 0
total_env_steps: 60000
stop_at_target: true
tasks: [{{env: gymnasium/CartPole-v1, num_envs: 8, target_score: 150}}]
actors: {{mode: serial}}
learner:
  algorithm: impala_replay
  unroll_length: 16
  batch_size: 8
  learning_rate: 0.001
  model: {{encoder_dim: 32, torso: [32]}}
  impala_replay: {{proportion: 0.5}}
replay: {{capacity: 20000}}
tracking: {{console: quiet, run_dir: {tmp_path}, wandb: {{mode: disabled}},
           final_eval_episodes: 8}}
checkpoint: {{enabled: false}}
""",
        env_ids=plugins.envs.ids(),
        algorithms=plugins.algorithms.parallel_support(),
    )
    trainer = Trainer(cfg, console=False)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    (task,) = result.tasks
    assert task.mean_return is not None and task.mean_return >= 150, task
    assert task.greedy_eval is not None and task.greedy_eval >= 150, task
