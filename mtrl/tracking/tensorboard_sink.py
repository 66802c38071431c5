"""TensorBoard event files: every record's numbers as scalars at the record's env steps.

``tracking.tensorboard`` turns it on. The event files go to ``<run_dir>/tensorboard`` (or to a
subdirectory named like the run under ``tracking.tensorboard.dir``); a resumed run adds a new
event file beside the old ones and TensorBoard shows them as one run. What is written:

* each metric of each record (``charts/env_steps``, ``charts/sps``, ``task/<id>/return``,
  ...) as a scalar whose step is the record's ``charts/env_steps``, so curves share the
  x-axis of ``mtrl report`` and wandb;
* the resolved config as YAML text (tag ``config``), once, with the first record;
* with ``histograms: true``, each task's returns of the episodes that ended since the record
  before, as a histogram (``task/<id>/episode_returns``) at the record's step.

``torch.utils.tensorboard.SummaryWriter`` hands events to a writer thread of its own, so
``write`` costs a protobuf per metric and never waits for the disk.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mtrl.errors import UserError

STEP_METRIC = "charts/env_steps"
SUBDIR = "tensorboard"
CONFIG_TAG = "config"
INSTALL_HINT = "pip install tensorboard (or pip install 'mtrl[tensorboard]')"


def event_dir(configured: Path | None, run_dir: Path | None, run_name: str) -> Path | None:
    """Where a run's event files go: ``configured/<run_name>``, else ``run_dir/tensorboard``;
    None when neither is given (a run that writes no files)."""
    if configured is not None:
        return Path(configured).expanduser() / run_name
    return Path(run_dir) / SUBDIR if run_dir is not None else None


def summary_writer_class() -> type:
    """``torch.utils.tensorboard.SummaryWriter``; a one-line :class:`UserError` saying what to
    install when the ``tensorboard`` package is missing (torch needs it to write events)."""
    missing = "tracking.tensorboard.enabled is true but the tensorboard package is not installed"
    if importlib.util.find_spec("tensorboard") is None:
        raise UserError(f"{missing}: {INSTALL_HINT}")
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:  # installed but broken (a version torch refuses)
        raise UserError(f"{missing} or unusable ({e}): {INSTALL_HINT}") from None
    return SummaryWriter


def config_text(config: dict[str, Any]) -> str:
    """The config as a Markdown code block (TensorBoard's text tab renders Markdown)."""
    body = yaml.safe_dump(config, sort_keys=False)
    return "\n".join("    " + line for line in body.splitlines())


def _number(value: Any) -> float | None:
    """A record value as a float; None for what is not a number (TensorBoard takes scalars)."""
    if isinstance(value, int | float):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item):
        value = item()
        return float(value) if isinstance(value, int | float) else None
    return None


class TensorboardSink:
    """Writes records (and, with ``histograms``, episode returns) as TensorBoard events."""

    def __init__(self, log_dir: Path, config: dict[str, Any], *, histograms: bool = False) -> None:
        writer_class = summary_writer_class()
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._writer = writer_class(log_dir=str(self.log_dir), max_queue=1000, flush_secs=10)
        self._config: dict[str, Any] | None = config
        self.histograms = histograms
        self._returns: dict[str, list[float]] = {}
        self._step = 0

    def write(self, record: dict[str, Any]) -> None:
        steps = _number(record.get(STEP_METRIC))
        if steps is not None:
            self._step = int(steps)
        if self._config is not None:
            self._writer.add_text(CONFIG_TAG, config_text(self._config), self._step)
            self._config = None
        for name, value in record.items():
            x = _number(value)
            if x is not None:
                self._writer.add_scalar(name, x, self._step)
        for task, returns in self._returns.items():
            if returns:
                values = np.asarray(returns, dtype=np.float64)
                self._writer.add_histogram(f"task/{task}/episode_returns", values, self._step)
        self._returns = {}

    def add_episodes(
        self,
        task: str,
        env_steps: int,
        returns: Sequence[float],
        lengths: Sequence[int],
        wall_s: float,
    ) -> None:
        """Keep the returns for the next record's histogram (only with ``histograms``)."""
        if self.histograms:
            self._returns.setdefault(task, []).extend(float(r) for r in returns)

    def close(self) -> None:
        self._writer.close()
