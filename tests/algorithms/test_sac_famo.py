"""FAMO on SAC's critic losses (``learner.multitask.loss_weighting: famo``): refused in one line
by the IMPALA rules and with a gradient combination, at validate and at train; its logits and
their optimiser survive a checkpoint; a short run trains with it and logs each task's weight."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.algorithms.sac import SacLearner, make_sac_learner
from mtrl.checkpoint import check_plain
from mtrl.cli import main
from mtrl.config import parse_config
from mtrl.learner.batch import TaskBatch
from mtrl.learner.model import MultiTaskModel, TaskSpaces
from mtrl.train.trainer import Trainer
from tests.refusals import refusal

pytestmark = pytest.mark.timeout(600)

BOX = TaskSpaces(spaces.Box(-8, 8, (3,), np.float32), spaces.Box(-2, 2, (1,), np.float32))
T = 8

RUN = """
seed: 3
total_env_steps: 640
tasks:
  - {env: gymnasium/Pendulum-v1, num_envs: 2, name: swing_a}
  - {env: gymnasium/Pendulum-v1, num_envs: 2, name: swing_b, env_kwargs: {g: 4.0}}
actors: {mode: serial}
learner:
  algorithm: ALGORITHM
  unroll_length: 8
  batch_size: 2
  model: {encoder_dim: 16, torso: [16]}
  multitask: MULTITASK
  sac: {learning_starts: 100, batch_size: 32, replay_ratio: 8}
checkpoint: {enabled: false}
tracking: {console: quiet, csv: false, wandb: {mode: disabled}, final_eval_episodes: 0,
           log_every_s: 0.01, run_dir: RUNS}
"""


def _config(tmp_path: Path, algorithm: str, multitask: str) -> Path:
    text = (
        RUN.replace("ALGORITHM", algorithm)
        .replace("MULTITASK", multitask)
        .replace("RUNS", str(tmp_path / "runs"))
    )
    if algorithm != "sac":
        text = text.replace("  sac: {learning_starts: 100, batch_size: 32, replay_ratio: 8}\n", "")
    path = tmp_path / "famo.yaml"
    path.write_text(text)
    return path


REFUSED = {
    "impala": (
        "impala",
        "{loss_weighting: famo}",
        "learner.multitask.loss_weighting: famo is not supported by impala (its policy-gradient",
    ),
    "impala_replay": (
        "impala_replay",
        "{loss_weighting: famo}",
        "learner.multitask.loss_weighting: famo is not supported by impala_replay",
    ),
    "with pcgrad": (
        "sac",
        "{loss_weighting: famo, gradients: pcgrad}",
        "loss_weighting: famo is not combined with gradients: pcgrad",
    ),
    "with cagrad": (
        "sac",
        "{loss_weighting: famo, gradients: cagrad}",
        "loss_weighting: famo is not combined with gradients: cagrad",
    ),
}


@pytest.mark.parametrize("command", ["validate", "train"])
@pytest.mark.parametrize("case", list(REFUSED))
def test_famo_is_refused_in_one_line_where_it_does_not_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, command: str
) -> None:
    algorithm, multitask, said = REFUSED[case]
    path = _config(tmp_path, algorithm, multitask)
    line = refusal(command, path, tmp_path / "runs", capsys)
    assert f"{path}:" in line and said in line, line


def test_sac_with_famo_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(_config(tmp_path, "sac", "{loss_weighting: famo}"))]) == 0


def _learner(famo: str = "loss_weighting: famo") -> SacLearner:
    cfg = parse_config(
        "tasks: [{env: a/b}]\ncheckpoint: {replay: true}\n"
        f"learner: {{algorithm: sac, unroll_length: {T}, model: {{encoder_dim: 16, torso: [16]}},"
        f" multitask: {{{famo}}}, sac: {{replay_ratio: 4, batch_size: 16, learning_starts: 1}}}}\n"
    )
    torch.manual_seed(0)
    model = MultiTaskModel([BOX, BOX, BOX], cfg.learner.model)
    return make_sac_learner(model, cfg.learner, ["a", "b", "c"])


def _batch(task: int, rng: np.random.Generator) -> TaskBatch:
    """``T`` steps of 2 env copies; task ``task``'s rewards are ``task`` times larger."""
    n = 2
    return TaskBatch(
        task=task,
        obs=torch.as_tensor(rng.normal(size=(T + 1, n, 3)), dtype=torch.float32),
        actions=torch.as_tensor(rng.normal(size=(T, n, 1)), dtype=torch.float32),
        behaviour_logp=torch.zeros(T, n),
        rewards=torch.as_tensor((1 + 3 * task) * rng.normal(size=(T, n)), dtype=torch.float32),
        terminated=torch.zeros(T, n, dtype=torch.bool),
        truncated=torch.zeros(T, n, dtype=torch.bool),
        valid=torch.ones(T, n, dtype=torch.bool),
        policy_version=0,
    )


def test_famo_moves_the_critics_step_and_its_weights() -> None:
    """The same updates with and without FAMO: the critics end elsewhere, the weights leave
    uniform and are logged per task, summing to 1."""
    plain, famo = _learner("loss_weighting: none"), _learner()
    for learner in (plain, famo):
        rng = np.random.default_rng(4)
        torch.manual_seed(7)
        for _ in range(3):
            learner.update([_batch(k, rng) for k in range(3)])
    assert plain.famo is None and famo.famo is not None
    assert any(
        not torch.allclose(a, b)
        for a, b in zip(plain.critic.parameters(), famo.critic.parameters(), strict=True)
    )
    weights = [famo.pop_diagnostics()[f"learner/{k}/famo_weight"] for k in "abc"]
    assert sum(weights) == pytest.approx(1.0)
    assert max(weights) - min(weights) > 1e-4
    assert not any("famo_weight" in key for key in plain.pop_diagnostics())


def test_famos_state_survives_a_checkpoint() -> None:
    learner = _learner()
    rng = np.random.default_rng(4)
    for _ in range(3):
        learner.update([_batch(k, rng) for k in range(3)])
    state = learner.state_dict()
    check_plain(state)
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    other = _learner()
    other.load_state_dict(torch.load(buf, weights_only=True))
    assert learner.famo is not None and other.famo is not None
    assert not torch.equal(learner.famo.logits, torch.zeros(3))
    assert torch.equal(other.famo.logits, learner.famo.logits)
    # The logits' Adam moments came back too: the next update is the same in both.
    batches = [_batch(k, np.random.default_rng(5)) for k in range(3)]
    for one in (learner, other):
        one.rng = np.random.default_rng(9)
        torch.manual_seed(7)
        one.update(batches)
    assert torch.equal(other.famo.logits, learner.famo.logits)
    for a, b in zip(other.critic.parameters(), learner.critic.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_short_sac_run_trains_with_famo_and_logs_each_tasks_weight(tmp_path: Path) -> None:
    cfg = parse_config(_config(tmp_path, "sac", "{loss_weighting: famo}").read_text())
    trainer = Trainer(cfg, console=False)
    try:
        result = trainer.run()
        learner = trainer.learner
        assert learner.stacked is not None  # two tasks of one shape: the stacked step
        assert learner.gradient_steps > 50, learner.gradient_steps
    finally:
        trainer.close()
    records = [
        json.loads(line)
        for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]
    logged = [r for r in records if "learner/swing_a/famo_weight" in r]
    assert logged, records[-1].keys()
    last = logged[-1]
    weights = [last["learner/swing_a/famo_weight"], last["learner/swing_b/famo_weight"]]
    assert sum(weights) == pytest.approx(1.0, abs=1e-6)
    assert weights[0] != weights[1]
    assert all(np.isfinite(r["losses/critic"]) for r in records if "losses/critic" in r)
