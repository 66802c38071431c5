"""The tracker's settings: the config's ``tracking.mlflow:`` section, validated by mtrl with
this model (``mtrl validate`` reports a bad key or value with its file and line)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat


class MlflowSettings(BaseModel):
    """An MLflow run per training run: the resolved config as params, every metric record at
    its env step (``charts/env_steps``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    enabled: bool = True
    """Log to MLflow. The section alone turns the tracker on; ``false`` keeps the section and
    turns it off."""
    tracking_uri: str | None = None
    """Where runs go: a server (``http://host:5000``), a database (``sqlite:///runs.db``, needs
    ``pip install sqlalchemy alembic``), or a local folder (a path or ``file:`` URI: MLflow's
    file store). None: ``MLFLOW_TRACKING_URI`` when it is set, else the folder ``mlruns`` in
    the run directory."""
    experiment: str | None = Field(default=None, min_length=1)
    """MLflow experiment of the run (created when missing); None: the config's ``name``."""
    run_name: str | None = Field(default=None, min_length=1)
    """MLflow run name; None: the run directory's name (``{config}__{seed}__{time}``)."""
    tags: dict[str, str] = Field(default_factory=dict)
    """Extra tags of the run."""
    log_config: bool = True
    """Log the resolved config as params (flattened keys: ``learner.learning_rate``,
    ``tasks.0.env``) and as the artifact ``config.yaml``."""
    finish_timeout_s: PositiveFloat = 30.0
    """Seconds the end of the run waits for the last records to reach MLflow."""
