"""The built-in trackers, registered through ``mtrl_register_trackers`` like any plugin's.

The plugin manager loads this module by name as the built-in plugin ``tracking``. Each factory
reads its own setting of ``cfg.tracking`` and returns None where that leaves it off, so every
built-in tracker is offered to every run and the config alone decides (``tracking.trackers``
selects among the other plugins' trackers). The files need a run directory: a run without one
(a torchrun replica other than rank 0, a test) gets none of them.

The console is not a tracker here: it is the run's own view, which a caller may silence
whatever the config says, and :func:`mtrl.tracking.make_sinks` adds it last.
"""

from __future__ import annotations

from pathlib import Path

from mtrl.config import ExperimentConfig
from mtrl.plugins.hookspecs import hookimpl
from mtrl.plugins.tracker_registrar import TrackerRegistrar
from mtrl.tracking.csv_sink import CsvSink
from mtrl.tracking.episodes import FILENAME as EPISODES_FILE
from mtrl.tracking.episodes import EpisodeCsvSink
from mtrl.tracking.sinks import JsonlSink, Sink, TrackerFactory
from mtrl.tracking.tensorboard_sink import TensorboardSink, event_dir
from mtrl.tracking.wandb_sink import WandbSink, wandb_enabled

#: The name the plugin manager gives this module (``mtrl.plugins.manager.BUILTIN_PLUGINS``).
PLUGIN = "tracking"


def _run_name(cfg: ExperimentConfig, run_dir: Path | None) -> str:
    return Path(run_dir).name if run_dir is not None else cfg.name


def metrics_jsonl(
    cfg: ExperimentConfig, run_dir: Path | None, task_names: list[str]
) -> Sink | None:
    """``metrics.jsonl``: every record, one JSON object a line (what ``mtrl report`` reads)."""
    return JsonlSink(Path(run_dir) / "metrics.jsonl") if run_dir is not None else None


def metrics_csv(cfg: ExperimentConfig, run_dir: Path | None, task_names: list[str]) -> Sink | None:
    """``metrics.csv``: every record, a column per metric (``tracking.csv``)."""
    if run_dir is None or not cfg.tracking.csv:
        return None
    return CsvSink(Path(run_dir) / "metrics.csv")


def episodes_csv(cfg: ExperimentConfig, run_dir: Path | None, task_names: list[str]) -> Sink | None:
    """``episodes.csv``: every finished episode (:mod:`mtrl.tracking.episodes`)."""
    return EpisodeCsvSink(Path(run_dir) / EPISODES_FILE) if run_dir is not None else None


def wandb_run(cfg: ExperimentConfig, run_dir: Path | None, task_names: list[str]) -> Sink | None:
    """A wandb run with the resolved config (``tracking.wandb``; :mod:`.wandb_sink`)."""
    if not wandb_enabled(cfg):
        return None
    return WandbSink(
        cfg.tracking.wandb,
        name=_run_name(cfg, run_dir),
        config=cfg.model_dump(mode="json"),
        run_dir=run_dir,
    )


def tensorboard_events(
    cfg: ExperimentConfig, run_dir: Path | None, task_names: list[str]
) -> Sink | None:
    """TensorBoard event files (``tracking.tensorboard``; :mod:`.tensorboard_sink`). Raises a
    :class:`mtrl.errors.UserError` when it is on and the ``tensorboard`` package is missing."""
    tb = cfg.tracking.tensorboard
    where = event_dir(tb.dir, run_dir, _run_name(cfg, run_dir))
    if not tb.enabled or where is None:
        return None
    return TensorboardSink(where, cfg.model_dump(mode="json"), histograms=tb.histograms)


#: name -> (factory, description), in the order their sinks are fed each record.
BUILTIN_TRACKERS: dict[str, tuple[TrackerFactory, str]] = {
    "jsonl": (metrics_jsonl, "metrics.jsonl in the run directory: every record"),
    "csv": (metrics_csv, "metrics.csv in the run directory: every record (tracking.csv)"),
    "episodes": (episodes_csv, "episodes.csv in the run directory: every finished episode"),
    "wandb": (wandb_run, "a Weights & Biases run (tracking.wandb)"),
    "tensorboard": (tensorboard_events, "TensorBoard event files (tracking.tensorboard)"),
}


@hookimpl
def mtrl_register_trackers(register: TrackerRegistrar) -> None:
    """Offer the run files, wandb and TensorBoard (see :data:`BUILTIN_TRACKERS`)."""
    for name, (factory, description) in BUILTIN_TRACKERS.items():
        register.tracker(name, factory, description=description)
