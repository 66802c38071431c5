"""Checkpoint storage: atomic writes that survive SIGKILL, pruning, fallback, safe loading."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mtrl.algorithms.impala.learner import ImpalaLearner
from mtrl.checkpoint import (
    CheckpointWarning,
    UnsafeCheckpointError,
    capture_rng_state,
    checkpoint_step,
    list_checkpoints,
    load_checkpoint,
    load_latest,
    restore_rng_state,
    save_checkpoint,
)
from mtrl.config import LearnerConfig, ModelConfig
from mtrl.errors import CheckpointError, UserError
from mtrl.learner.model import MultiTaskModel, TaskSpaces

WRITER = Path(__file__).with_name("ckpt_writer.py")


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def test_roundtrip_is_bit_for_bit(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(1)
    tensors = {
        "f32": torch.randn(7, 3, generator=g),
        "special": torch.tensor([float("nan"), float("inf"), -0.0, 1e-45]),
        "f64": torch.randn(5, dtype=torch.float64, generator=g),
        "bf16": torch.randn(4, generator=g).to(torch.bfloat16),
        "i64": torch.tensor([2**62, -(2**62)]),
        "u8": torch.arange(256, dtype=torch.uint8),
        "bool": torch.tensor([True, False]),
        "strided": torch.randn(6, 6, generator=g)[::2, 1::3],
    }
    state = {
        "tensors": tensors,
        "counters": {"env_steps": 123, "big": 2**100, "ratio": 0.1},
        "names": ["a/b", "c"],
        "pair": (1, None),
    }
    path = save_checkpoint(tmp_path, state, step=42, keep_last=2)
    assert path == tmp_path / "checkpoints" / "ckpt_000000000042.pt"
    loaded = load_checkpoint(path)
    for k, t in tensors.items():
        assert _same_bits(loaded["tensors"][k], t), k
    assert loaded["counters"] == state["counters"]
    assert loaded["names"] == state["names"] and loaded["pair"] == (1, None)


def test_learner_state_roundtrips_and_resumes_identically(tmp_path: Path) -> None:
    def make() -> ImpalaLearner:
        torch.manual_seed(0)
        model = MultiTaskModel(
            [TaskSpaces(spaces.Box(-1, 1, (4,)), spaces.Discrete(2))],
            ModelConfig(encoder_dim=8, torso=[8]),
        )
        return ImpalaLearner(model, LearnerConfig(), ["t"])

    a = make()
    loss = sum(p.sum() for p in a.model.parameters())
    loss.backward()
    a.optimizer.step()  # gives the optimiser real state (Adam moments, step)
    a.version = 7
    save_checkpoint(tmp_path, {"learner": a.state_dict()}, step=1, keep_last=1)
    state, _ = load_latest(tmp_path)
    b = make()
    b.load_state_dict(state["learner"])
    assert b.version == 7
    sd_a, sd_b = a.model.state_dict(), b.model.state_dict()
    assert sd_a.keys() == sd_b.keys()
    for name in sd_a:
        assert _same_bits(sd_a[name], sd_b[name]), name
    sa, sb = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
    assert all(_same_bits(sa[i]["exp_avg"], sb[i]["exp_avg"]) for i in sa)


def test_rng_state_restores_every_generator(tmp_path: Path) -> None:
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    save_checkpoint(tmp_path, {"rng": capture_rng_state()}, step=0, keep_last=1)
    expected = (random.random(), np.random.rand(), torch.rand(2).tolist())
    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    restore_rng_state(load_latest(tmp_path)[0]["rng"])
    assert (random.random(), np.random.rand(), torch.rand(2).tolist()) == expected


def test_keep_last_prunes_oldest(tmp_path: Path) -> None:
    for step in (10, 20, 30, 40, 50):
        save_checkpoint(tmp_path, {"step": step}, step=step, keep_last=2)
    assert [checkpoint_step(p) for p in list_checkpoints(tmp_path)] == [40, 50]
    save_checkpoint(tmp_path, {"step": -1}, step=50, keep_last=2)  # same step: overwritten
    assert load_latest(tmp_path)[0] == {"step": -1}
    assert not list((tmp_path / "checkpoints").glob("*.tmp"))


def test_truncated_newest_falls_back_to_previous(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, {"w": torch.full((1000,), float(step))}, step, keep_last=3)
    newest = list_checkpoints(tmp_path)[-1]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    with pytest.warns(CheckpointWarning, match=r"ckpt_000000000003\.pt: truncated or corrupt"):
        state, path = load_latest(tmp_path)
    assert checkpoint_step(path) == 2 and float(state["w"][0]) == 2.0


def test_flipped_byte_is_detected(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, {"w": torch.zeros(4096)}, 1, keep_last=3)
    path = save_checkpoint(tmp_path, {"w": torch.zeros(4096)}, 2, keep_last=3)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the tensor bytes: unpickling alone would not notice
    path.write_bytes(bytes(data))
    with pytest.warns(CheckpointWarning, match="bad checksum"):
        assert checkpoint_step(load_latest(tmp_path)[1]) == 1


def test_no_loadable_checkpoint_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no checkpoints"):
        load_latest(tmp_path)
    path = save_checkpoint(tmp_path, {"a": 1}, 1, keep_last=1)
    path.write_bytes(b"")
    with pytest.warns(CheckpointWarning), pytest.raises(UserError) as info:
        load_latest(tmp_path)
    assert "no loadable checkpoint" in str(info.value) and "ckpt_000000000001" in str(
        info.value.problems
    )


def test_checkpoint_carrying_code_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "checkpoints"
    d.mkdir()
    save_checkpoint(tmp_path, {"ok": True}, 1, keep_last=3)
    torch.save({"payload": os.system}, d / "ckpt_000000000002.pt")  # the classic attack
    with pytest.raises(UnsafeCheckpointError, match=r"refused.*pickled code.*system"):
        load_latest(tmp_path)  # no silent fallback past a tampered file


def test_saving_non_plain_data_is_refused_before_writing(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"state\['a'\]\['x'\].*ndarray.*tolist"):
        save_checkpoint(tmp_path, {"a": {"x": np.zeros(3)}}, 1, keep_last=1)
    with pytest.raises(CheckpointError, match=r"state\['f'\].*function"):
        save_checkpoint(tmp_path, {"f": lambda: 0}, 1, keep_last=1)
    assert list_checkpoints(tmp_path) == []


def test_sigkill_during_writes_never_leaves_a_bad_checkpoint(tmp_path: Path) -> None:
    """A writer killed at random moments: every file present loads; at most one interval lost.

    At least 4 rounds, and on until a kill has landed mid-write (what the test is about; a
    busy machine can make the writer slow to start writing, so the rounds a kill needs to
    land there are not fixed), 40 at most."""
    interval, numel, rng = 100, 2_000_000, random.Random(0)
    last_saved = newest = mid_write = round_ = 0
    while round_ < 4 or (mid_write < 1 and round_ < 40):
        round_ += 1
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(tmp_path), str(interval), str(numel)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        first = int(proc.stdout.readline())  # it is writing now
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        printed = [first, *map(int, rest.split())]
        assert printed[0] == newest + interval, "the writer must resume from the newest"
        last_saved = printed[-1]

        mid_write += any((tmp_path / "checkpoints").glob("*.tmp"))
        ckpts = list_checkpoints(tmp_path)
        assert 1 <= len(ckpts) <= 4, ckpts  # keep_last=3, +1 if killed before pruning
        for path in ckpts:  # every checkpoint present is complete
            state = load_checkpoint(path)
            assert state["step"] == checkpoint_step(path)
            assert torch.all(state["data"] == float(state["step"])), path
        newest = checkpoint_step(ckpts[-1]) or 0
        assert last_saved <= newest <= last_saved + interval, (round_, newest, last_saved)
    # The writer spends nearly all its time inside save_checkpoint, so kills land mid-write.
    assert mid_write >= 1, "no kill landed during a write; the test proved nothing"
