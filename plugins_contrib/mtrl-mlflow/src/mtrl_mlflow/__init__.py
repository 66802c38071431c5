"""An MLflow tracker for mtrl, registered through the ``mtrl_register_trackers`` hook.

A config turns it on with a ``tracking.mlflow:`` section (:class:`MlflowSettings`); each run
then becomes an MLflow run holding the resolved config as params and every metric record at
its env step.
"""

from mtrl_mlflow.settings import MlflowSettings

__all__ = ["MlflowSettings"]
