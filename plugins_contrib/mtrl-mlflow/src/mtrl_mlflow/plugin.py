"""The hook: registers the tracker ``mlflow`` with its settings model.

Registration imports nothing of MLflow (every mtrl process loads plugins, spawned workers
too); the factory runs once per training run and the sink imports MLflow on its own thread.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mtrl.plugins import PluginUnavailable, hookimpl
from mtrl_mlflow.settings import MlflowSettings

NAME = "mlflow"


def tracking_uri(settings: MlflowSettings, run_dir: Path | None) -> str | None:
    """Where the run goes: the setting (a plain path made a ``file:`` URI), else
    ``MLFLOW_TRACKING_URI``, else ``<run_dir>/mlruns``; None when there is nowhere (no setting
    and no run directory)."""
    uri = settings.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        if len(urlparse(uri).scheme) > 1:  # a URI (one letter would be a Windows drive)
            return uri
        return Path(uri).expanduser().resolve().as_uri()
    return (Path(run_dir) / "mlruns").resolve().as_uri() if run_dir is not None else None


def make_mlflow(
    cfg: Any, run_dir: Path | None, task_names: list[str], settings: MlflowSettings | None
) -> Any:
    """The run's MLflow sink, or None where the config does not ask for one: no
    ``tracking.mlflow:`` section (and ``mlflow`` not named in ``tracking.trackers``), or
    ``enabled: false``."""
    from mtrl_mlflow.sink import MlflowSink, RunPlan

    if settings is None:
        if NAME not in (cfg.tracking.trackers or ()):
            return None
        settings = MlflowSettings()
    uri = tracking_uri(settings, run_dir)
    if not settings.enabled or uri is None:
        return None
    plan = RunPlan(
        tracking_uri=uri,
        experiment=settings.experiment or cfg.name,
        run_name=settings.run_name or (Path(run_dir).name if run_dir is not None else cfg.name),
        tags={"mtrl.config": cfg.name, **settings.tags},
        config=cfg.model_dump(mode="json") if settings.log_config else None,
        run_dir=Path(run_dir) if run_dir is not None else None,
    )
    return MlflowSink(plan, settings.finish_timeout_s)


@hookimpl
def mtrl_register_trackers(register: Any) -> None:
    """Offer ``mlflow`` (settings: :class:`MlflowSettings`, ``tracking.mlflow:``)."""
    if importlib.util.find_spec("mlflow") is None:
        raise PluginUnavailable("MLflow is not installed: pip install mlflow-skinny")
    register.tracker(
        NAME,
        make_mlflow,
        settings=MlflowSettings,
        description="an MLflow run: the config as params, metrics by env step (tracking.mlflow)",
    )
