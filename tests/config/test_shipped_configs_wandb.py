"""Shipped configs run offline and quietly: none starts wandb unless its file says why.

A wandb run prints ~40 lines into the console and writes a ``wandb/`` directory beside the
run; the configs a newcomer starts with (quickstart, memory_text, ...) turn it off with
``tracking.wandb.mode: disabled``. A config meant for a tracked run (a GPU-sized job) may leave
it on, and then says so in a comment that names wandb.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mtrl.config import load_config
from mtrl.tracking.wandb_sink import wandb_enabled

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))


def _comments(text: str) -> list[str]:
    """The comment part of each line of ``text`` (``#`` to the end of the line)."""
    return [line.split("#", 1)[1] for line in text.splitlines() if "#" in line]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_a_shipped_config_starts_wandb_only_where_it_says_why(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WANDB_MODE", raising=False)  # the test suite's own offline setting
    cfg = load_config(path)
    if not wandb_enabled(cfg):
        return
    documented = any("wandb" in c.lower() for c in _comments(path.read_text()))
    assert documented, (
        f"{path.name} starts wandb (tracking.wandb.mode: {cfg.tracking.wandb.mode}): set "
        "`tracking: {wandb: {mode: disabled}}` as the other shipped configs do, or say in a "
        "comment why this config is meant to be tracked in wandb"
    )


def test_the_memory_text_config_keeps_wandb_off() -> None:
    """The config whose wandb output filled the console of a first run."""
    (path,) = [p for p in CONFIGS if p.name == "memory_text.yaml"]
    assert load_config(path).tracking.wandb.mode == "disabled"
