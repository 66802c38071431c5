"""Weights & Biases sink that can never block or crash training.

Every wandb call (import, init, log, finish) runs on one background thread fed by a bounded
queue: ``write`` only enqueues, so a slow or hung wandb costs training nothing. Any wandb
error is reported once and the sink goes quiet; an online init that fails (no network, bad
key) falls back to offline, so the metrics are still kept for a later ``wandb sync``.

Mode ``auto`` means: ``WANDB_MODE`` if set, else online when wandb would find credentials
(``WANDB_API_KEY``, netrc or its settings file; see :func:`has_api_key`, which never touches
the network), else offline. The run lives under
``{run_dir}/wandb``; its id is kept in ``{run_dir}/wandb_id.txt`` so a resumed run continues
the same wandb run. ``charts/env_steps`` is the x-axis of every metric.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import queue
import secrets
import threading
from pathlib import Path
from typing import Any

from mtrl.config import ExperimentConfig, WandbConfig

log = logging.getLogger("mtrl.tracking")

STEP_METRIC = "charts/env_steps"
ID_FILE = "wandb_id.txt"
_ENV_MODES = {"online": "online", "run": "online", "offline": "offline", "dryrun": "offline"}


def wandb_enabled(cfg: ExperimentConfig) -> bool:
    """Whether to start a wandb sink (decided without importing wandb).

    Off when the config or ``WANDB_MODE`` says ``disabled``, and in ``auto`` mode when wandb
    is not installed (an explicit online/offline mode without wandb is reported instead).
    """
    mode = cfg.tracking.wandb.mode
    if mode == "auto":
        if os.environ.get("WANDB_MODE", "").strip().lower() == "disabled":
            return False
        if importlib.util.find_spec("wandb") is None:
            log.info("tracking: wandb is not installed; `pip install wandb` to use it")
            return False
        return True
    return mode != "disabled"


def resolve_mode(mode: str) -> str:
    """``auto`` → the mode wandb would use here (see the module docstring); others unchanged."""
    if mode != "auto":
        return mode
    env = os.environ.get("WANDB_MODE", "").strip().lower()
    if env == "disabled":
        return "disabled"
    if env in _ENV_MODES:
        return _ENV_MODES[env]
    return "online" if has_api_key() else "offline"


def has_api_key() -> bool:
    """Whether wandb would find credentials: env vars, netrc or its settings file.

    Uses wandb's own netrc reader and settings, never the network (``wandb.login`` would
    contact the server to greet the user and rewrite settings files).
    """
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    try:
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib import wbauth

        settings = wandb_setup.singleton().settings
        return bool(wbauth.read_netrc_auth(host=settings.base_url) or settings.api_key)
    except Exception:  # a malformed netrc entry, or wandb internals moved: offline is safe
        return False


def run_id(run_dir: Path | None) -> str:
    """The wandb run id of ``run_dir`` (created and stored on first use)."""
    new = secrets.token_hex(4)
    if run_dir is None:
        return new
    path = Path(run_dir) / ID_FILE
    if path.exists():
        stored = path.read_text(encoding="utf-8").strip()
        if stored:
            return stored
    path.write_text(new + "\n", encoding="utf-8")
    return new


class WandbSink:
    """Logs records to a wandb run (see the module docstring for the guarantees)."""

    def __init__(
        self,
        cfg: WandbConfig,
        *,
        name: str,
        config: dict[str, Any],
        run_dir: Path | None = None,
        max_queue: int = 10_000,
    ) -> None:
        self.cfg = cfg
        self.name = name
        self.config = config
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.run_id = run_id(self.run_dir)
        self.mode: str | None = None  # resolved on the worker thread
        self.run_path: Path | None = None  # wandb's local directory of the run, once started
        self.error: str | None = None
        self.started = threading.Event()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=max_queue)
        self._dropping = False
        self._thread = threading.Thread(target=self._work, name="mtrl-wandb", daemon=True)
        self._thread.start()

    def write(self, record: dict[str, Any]) -> None:
        if self.error is not None:
            return
        try:
            self._queue.put_nowait(dict(record))
        except queue.Full:
            if not self._dropping:
                self._dropping = True
                log.warning("wandb: falling behind; dropping records until it catches up")
            return
        self._dropping = False

    def close(self, timeout_s: float | None = None) -> None:
        """Finish the run; waits at most ``timeout_s`` (default: the config's finish timeout)."""
        timeout = self.cfg.finish_timeout_s if timeout_s is None else timeout_s
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)
        if self._thread.is_alive():
            where = f" (local data: {self.run_path})" if self.run_path else ""
            log.warning(
                "wandb: did not finish within %.0f s; leaving it behind%s; "
                "`wandb sync` uploads what was written",
                timeout,
                where,
            )

    # -- worker thread ----------------------------------------------------------------------

    def _fail(self, what: str, e: BaseException) -> None:
        if self.error is None:
            lines = str(e).strip().splitlines()
            self.error = f"{what}: {type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")
            log.warning("wandb: %s; training continues without wandb", self.error)

    def _work(self) -> None:
        run = None
        try:
            run = self._start()
        except Exception as e:
            self._fail("could not start", e)
        finally:
            self.started.set()
        while True:
            record = self._queue.get()
            if record is None:
                break
            if run is None or self.error is not None:
                continue
            try:
                run.log(record)
            except Exception as e:
                self._fail("log failed", e)
        if run is not None:
            try:
                run.finish(exit_code=1 if self.error else 0)
            except Exception as e:
                self._fail("finish failed", e)

    def _start(self) -> Any:
        import wandb

        self.mode = resolve_mode(self.cfg.mode)
        if self.mode == "disabled":
            return None
        try:
            run = self._init(wandb, self.mode)
        except Exception as e:
            if self.mode != "online":
                raise
            # The failed online run keeps its id busy in wandb's service: go on under a
            # derived id (the same one on every fallback of this run dir, so syncs merge).
            self.run_id = f"{self.run_id}-offline"
            log.warning(
                "wandb: online start failed (%s); logging offline as run %s instead, "
                "`wandb sync` later",
                str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__,
                self.run_id,
            )
            self.mode = "offline"
            run = self._init(wandb, "offline")
        run.define_metric(STEP_METRIC)
        run.define_metric("*", step_metric=STEP_METRIC)
        self.run_path = Path(run.dir).parent
        return run

    def _init(self, wandb: Any, mode: str) -> Any:
        c = self.cfg
        return wandb.init(
            project=c.project,
            entity=c.entity,
            group=c.group,
            tags=list(c.tags) or None,
            name=self.name,
            id=self.run_id,
            resume="allow",
            config=self.config,
            dir=str(self.run_dir) if self.run_dir is not None else None,
            mode=mode,
            reinit="create_new",
            settings=wandb.Settings(init_timeout=c.init_timeout_s, console="off"),
        )
