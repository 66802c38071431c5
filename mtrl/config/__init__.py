"""Experiment configs: pydantic models and YAML loading with precise error messages."""

from mtrl.config.core import CoreConfig
from mtrl.config.learner import LearnerConfig, ModelConfig, ParallelConfig, PopArtConfig
from mtrl.config.loading import config_schema, format_loc, load_config, parse_config
from mtrl.config.models import (
    ActorsConfig,
    CheckpointConfig,
    ExperimentConfig,
    SchedulerConfig,
    TaskConfig,
    TensorboardConfig,
    TrackingConfig,
    WandbConfig,
)
from mtrl.config.tune import SearchDimension, TuneConfig

__all__ = [
    "ActorsConfig",
    "CheckpointConfig",
    "CoreConfig",
    "ExperimentConfig",
    "LearnerConfig",
    "ModelConfig",
    "ParallelConfig",
    "PopArtConfig",
    "SchedulerConfig",
    "SearchDimension",
    "TaskConfig",
    "TensorboardConfig",
    "TrackingConfig",
    "TuneConfig",
    "WandbConfig",
    "config_schema",
    "format_loc",
    "load_config",
    "parse_config",
]
