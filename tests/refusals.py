"""A config that ``mtrl validate`` or ``mtrl train`` must refuse: one line on stderr, exit 2,
and no run directory left behind (nothing of a run started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtrl.cli import main


def refusal(command: str, path: Path, runs: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Runs ``mtrl COMMAND PATH``, checks it exits 2 with exactly one line on stderr and no run
    under ``runs`` (absent or empty), and returns that line."""
    assert main([command, str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert not runs.exists() or not any(runs.iterdir()), f"a run was started under {runs}"
    return line


def refused_text(
    command: str, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    """:func:`refusal` of ``text`` (a config whose ``RUNS`` becomes ``tmp_path/runs``), written
    to ``tmp_path/exp.yaml``."""
    path = tmp_path / "exp.yaml"
    path.write_text(text.replace("RUNS", str(tmp_path / "runs")))
    return refusal(command, path, tmp_path / "runs", capsys)
