"""The sink: records go on a queue at once, and a thread of its own sends them to MLflow.

Training never waits for MLflow: importing it (seconds), creating the experiment and the run,
and every ``log_batch`` happen on the sink's thread. A store that cannot be reached is said
once and the records are dropped; training goes on.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtrl_mlflow.params import file_store_name, flatten, metric_values

log = logging.getLogger("mtrl_mlflow")

#: Where a run directory remembers its MLflow run, so that ``mtrl train --resume`` goes on
#: logging into the same one.
RUN_FILE = "mlflow_run.json"
_STOP = object()


def is_file_store(uri: str) -> bool:
    """Whether ``uri`` names MLflow's file store (a ``file:`` URI)."""
    return uri.startswith("file:")


@dataclass
class RunPlan:
    """What the sink's thread creates or continues: where, under which names, with what."""

    tracking_uri: str
    experiment: str
    run_name: str
    tags: dict[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] | None = None
    """The resolved config to log as params and ``config.yaml`` (None: not logged)."""
    run_dir: Path | None = None


class MlflowSink:
    """An :class:`mtrl.tracking.Sink` logging each record's numbers at its env step."""

    def __init__(self, plan: RunPlan, finish_timeout_s: float = 30.0) -> None:
        self.plan = plan
        self.run_id: str | None = None
        self._finish_timeout_s = finish_timeout_s
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._step = 0
        self._failed = False
        self._name = file_store_name if is_file_store(plan.tracking_uri) else str
        self._thread = threading.Thread(target=self._serve, name="mtrl-mlflow", daemon=True)
        self._thread.start()

    def write(self, record: Mapping[str, Any]) -> None:
        """Queue ``record``'s numbers, stamped now, at its ``charts/env_steps``."""
        step = record.get("charts/env_steps", self._step)
        self._step = int(step) if isinstance(step, int | float) else self._step
        self._queue.put((int(time.time() * 1000), self._step, list(metric_values(record))))

    def close(self) -> None:
        """Send what is queued and end the MLflow run (waits ``finish_timeout_s`` at most)."""
        self._queue.put(_STOP)
        self._thread.join(self._finish_timeout_s)
        if self._thread.is_alive():
            log.warning(
                "mlflow: records not yet sent to %s after %.0f s are left behind",
                self.plan.tracking_uri,
                self._finish_timeout_s,
            )

    def _serve(self) -> None:
        try:
            client = self._start()
        except Exception as e:  # a store that cannot be reached: said once, records dropped
            log.warning("mlflow: cannot log to %s: %s: %s", self.plan.tracking_uri,
                        type(e).__name__, e)  # fmt: skip
            while self._queue.get() is not _STOP:
                pass
            return
        stop = False
        while not stop:
            items = [self._queue.get()]
            while True:  # what else waits goes in the same batch
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = _STOP in items
            self._send(client, [i for i in items if i is not _STOP])
        try:
            client.set_terminated(self.run_id, "FINISHED")
        except Exception as e:
            log.warning("mlflow: cannot end run %s: %s", self.run_id, e)

    def _start(self) -> Any:
        """The client, with :attr:`run_id` created (or continued, for a resumed run)."""
        plan = self.plan
        if is_file_store(plan.tracking_uri):
            # MLflow 3 refuses its file store unless told; the config chose it, so say so.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=plan.tracking_uri)
        previous = _previous_run(plan)
        if previous is not None:
            client.update_run(previous, status="RUNNING")
            self.run_id = previous
            return client
        found = client.get_experiment_by_name(plan.experiment)
        experiment_id = found.experiment_id if found else client.create_experiment(plan.experiment)
        run = client.create_run(experiment_id, run_name=plan.run_name, tags=plan.tags)
        self.run_id = run.info.run_id
        if plan.run_dir is not None:
            record = {"tracking_uri": plan.tracking_uri, "run_id": self.run_id}
            (plan.run_dir / RUN_FILE).write_text(json.dumps(record) + "\n", encoding="utf-8")
        if plan.config is not None:
            from mlflow.entities import Param

            params = [Param(self._name(k), v) for k, v in flatten(plan.config)]
            client.log_batch(self.run_id, params=params)
            client.log_dict(self.run_id, dict(plan.config), "config.yaml")
        return client

    def _send(self, client: Any, items: list[tuple[int, int, list[tuple[str, float]]]]) -> None:
        from mlflow.entities import Metric

        name = self._name
        metrics = [Metric(name(k), v, ts, step) for ts, step, values in items for k, v in values]
        if not metrics:
            return
        try:
            client.log_batch(self.run_id, metrics=metrics)
        except Exception as e:
            if not self._failed:  # once: a store that fails keeps failing
                log.warning("mlflow: cannot log metrics to run %s: %s", self.run_id, e)
            self._failed = True


def _previous_run(plan: RunPlan) -> str | None:
    """The MLflow run this run directory logged to before (a resumed run), if it went to the
    same store."""
    if plan.run_dir is None:
        return None
    try:
        saved = json.loads((plan.run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = isinstance(saved, dict) and saved.get("tracking_uri") == plan.tracking_uri
    return str(saved["run_id"]) if same and saved.get("run_id") else None
