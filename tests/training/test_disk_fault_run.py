"""A real ``mtrl train`` whose disk fails under it: full (a small tmpfs filled up), read-only
(a read-only bind mount over the run directory), or the run directory removed. By default the
run stops with exit status 2 and one ``error:`` line naming the fault, the directory and the
resume command, never a traceback, and every checkpoint written before still loads; with
``checkpoint.on_disk_error: continue`` it warns once and trains to its budget."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mtrl.checkpoint import checkpoint_dir, checkpoint_step, list_checkpoints, load_checkpoint
from tests.small_fs import fill, read_only, tmpfs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def _config(path: Path, runs: Path, total: int, on_disk_error: str = "stop") -> Path:
    path.write_text(
        f"""
name: disk
total_env_steps: {total}
tasks:
  - {{env: gymnasium/CartPole-v1, num_envs: 4}}
actors: {{mode: serial}}
learner: {{unroll_length: 16, batch_size: 8, model: {{encoder_dim: 32, torso: [64]}}}}
checkpoint: {{every_env_steps: 1000, every_s: null, keep_last: 2,
              on_disk_error: {on_disk_error}}}
tracking: {{run_dir: {runs}, console: quiet, log_every_s: 0.2, final_eval_episodes: 0,
            wandb: {{mode: disabled}}}}
"""
    )
    return path


def _train_and_break(
    cfg: Path, runs: Path, breaking: Callable[[Path], object]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Start ``mtrl train cfg``, call ``breaking(run_dir)`` once its first checkpoint is on
    disk, and wait for the run to end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtrl.cli", "train", str(cfg)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        run_dir = None
        while time.monotonic() < deadline and proc.poll() is None:
            found = list(runs.glob("disk__*"))
            if found and list_checkpoints(found[0]):
                run_dir = found[0]
                break
            time.sleep(0.02)
        assert run_dir is not None, proc.communicate(timeout=60)
        breaking(run_dir)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), run_dir


def _stopped_cleanly(done: subprocess.CompletedProcess[str], fault: str) -> str:
    """The run stopped with status 2 and one error line naming ``fault``; that line."""
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert fault in errors[0], errors[0]
    return errors[0]


def _kept(run_dir: Path) -> list[Path]:
    """The checkpoints on disk, each loaded; no temp file of a failed write is left."""
    ckpts = list_checkpoints(run_dir)
    assert ckpts
    for path in ckpts:
        load_checkpoint(path)
    assert not list(checkpoint_dir(run_dir).glob(".*.tmp"))
    return ckpts


def test_a_full_disk_stops_the_run_with_the_resume_command(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", "6m") as fs:
        runs = fs / "runs"
        cfg = _config(tmp_path / "disk.yaml", runs, total=2_000_000)
        filler: list[Path] = []
        done, run_dir = _train_and_break(cfg, runs, lambda _: filler.append(fill(fs)))
        line = _stopped_cleanly(done, "no space left on device")
        ckpts = _kept(run_dir)
        assert ckpts[-1].name in line
        assert f"make room, then continue with: mtrl train --resume {run_dir}" in line
        filler[0].unlink()  # room again: the command the line gave continues the run
        budget = str((checkpoint_step(ckpts[-1]) or 0) + 500)
        resume = ["train", "--resume", str(run_dir), "--total-env-steps", budget]
        resumed = subprocess.run(
            [sys.executable, "-m", "mtrl.cli", *resume],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert f"from {ckpts[-1].name}" in resumed.stdout


def test_a_full_disk_with_on_disk_error_continue_trains_to_the_budget(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs", "6m") as fs:
        runs = fs / "runs"
        cfg = _config(tmp_path / "disk.yaml", runs, total=8000, on_disk_error="continue")
        done, run_dir = _train_and_break(cfg, runs, lambda _: fill(fs))
        assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
        assert done.returncode == 0, done.stderr[-3000:]
        warned = [x for x in done.stdout.splitlines() if x.startswith("WARNING: checkpoint")]
        assert len(warned) == 1 and "no space left on device" in warned[0], done.stdout
        assert "training goes on without checkpoints" in warned[0]
        assert "WARNING: the final checkpoint" in done.stdout
        assert "8,0" in done.stdout or "env steps" in done.stdout  # the final table came
        _kept(run_dir)


def test_a_run_directory_made_read_only_stops_the_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cfg = _config(tmp_path / "disk.yaml", runs, total=2_000_000)
    with contextlib.ExitStack() as mounts:  # unmounted when the test ends
        done, run_dir = _train_and_break(cfg, runs, lambda d: mounts.enter_context(read_only(d)))
        line = _stopped_cleanly(done, "read-only file system")
        assert (
            f"make the run directory writable, then continue with: mtrl train --resume {run_dir}"
            in line
        )
        _kept(run_dir)


def test_a_run_directory_removed_under_the_run_stops_it(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    cfg = _config(tmp_path / "disk.yaml", runs, total=2_000_000)
    done, run_dir = _train_and_break(cfg, runs, shutil.rmtree)
    line = _stopped_cleanly(done, "no longer exists")
    assert str(run_dir) in line and "start it again" in line
    assert not run_dir.exists(), "the removed run directory was made again"
