"""Cutting a run's metric files back to a checkpoint: rows past it and lines torn by a kill
go, everything else stays byte for byte, and a file with nothing to cut is not rewritten."""

from __future__ import annotations

import json
from pathlib import Path

from mtrl.tracking.resume_trim import trim_to_checkpoint


def test_rows_past_the_checkpoint_and_torn_lines_go(tmp_path: Path) -> None:
    (tmp_path / "episodes.csv").write_text(
        "task,env_steps,return,length,wall_s\n"
        "a,100,1,10,0.5\n"
        "b,300,2,20,0.6\n"
        "other,999,3,30,0.7\n"  # a task the checkpoint does not know: kept
        "a,150,1,10,0.9\n"
        "b,350,2,20,1.0\n"
        "a,1"  # torn by the kill
    )
    records = [{"charts/env_steps": s, "x": 1} for s in (100, 400, 450, 500)]
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records) + '{"charts/env'
    )
    (tmp_path / "metrics.csv").write_bytes(  # csv.writer's line ends
        b"charts/env_steps,x\r\n100,1\r\n400,1\r\n450,1\r\n500,\r\n"
    )
    trim_to_checkpoint(tmp_path, 450, {"a": 120, "b": 330})

    assert (tmp_path / "episodes.csv").read_text() == (
        "task,env_steps,return,length,wall_s\na,100,1,10,0.5\nb,300,2,20,0.6\nother,999,3,30,0.7\n"
    )
    kept = [json.loads(x)["charts/env_steps"] for x in (tmp_path / "metrics.jsonl").open()]
    assert kept == [100, 400, 450]
    assert (tmp_path / "metrics.csv").read_bytes() == (
        b"charts/env_steps,x\r\n100,1\r\n400,1\r\n450,1\r\n"
    )
    assert not list(tmp_path.glob(".*"))


def test_a_file_with_nothing_past_the_checkpoint_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"charts/env_steps": 10}\n')
    inode = path.stat().st_ino
    trim_to_checkpoint(tmp_path, 10, {})
    assert path.stat().st_ino == inode and path.read_text() == '{"charts/env_steps": 10}\n'
