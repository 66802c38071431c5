"""``mtrl train``: train one agent on every task of a config, or continue a run with
``--resume``; ``--nproc N`` relaunches the same command under torchrun. Ctrl-C or SIGTERM
stops after the current round with a checkpoint. A disk that fails a checkpoint (full,
read-only, the run directory removed) ends the run after the final table with one line and
exit status 2 (``checkpoint.on_disk_error``: :mod:`mtrl.train.checkpointing`)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from mtrl.cli.exit_codes import EXIT_USER_ERROR
from mtrl.errors import UserError


def cmd_train(args: argparse.Namespace) -> int:
    """Train one agent on every task of CONFIG (or continue RUN_DIR with --resume); prints
    progress and a final per-task table. Ctrl-C or SIGTERM stops cleanly with a checkpoint."""
    from mtrl.actors.ray_cluster import placement_notes
    from mtrl.config import load_config, parse_config
    from mtrl.plugins import get_plugins
    from mtrl.train.budget_check import weight_notes
    from mtrl.train.checkpointing import DiskStop
    from mtrl.train.run_state import NothingToDo
    from mtrl.train.trainer import Trainer

    if args.nproc is not None and "WORLD_SIZE" not in os.environ:
        if args.config:  # a device the replicas cannot share fails here, in one line
            from mtrl.learner.device import resolve_device

            resolve_device(load_config(args.config).learner.device, 0, args.nproc)
        return _relaunch_with_torchrun(args.nproc)
    plugins = get_plugins()
    if args.resume:
        if args.config or args.seed is not None:
            raise UserError("--resume RUN_DIR continues a run as configured: drop CONFIG/--seed")
        run_dir = Path(args.resume)
        if not run_dir.is_dir():
            raise UserError(f"{run_dir}: no such run directory")
        try:
            trainer = Trainer.resume(run_dir, plugins, total_env_steps=args.total_env_steps)
        except NothingToDo as e:
            print(e)
            return 0
    else:
        if not args.config:
            raise UserError("give a CONFIG to train, or --resume RUN_DIR")
        cfg = load_config(
            args.config,
            **plugins.config_context(),
        )
        overrides: dict[str, Any] = {}
        if args.total_env_steps is not None:
            overrides["total_env_steps"] = args.total_env_steps
        if args.seed is not None:
            overrides["seed"] = args.seed
        if overrides:  # validated again against the plugins' names, as the file was
            import yaml

            data = {**cfg.model_dump(mode="json"), **overrides}
            context = plugins.config_context()
            cfg = parse_config(yaml.safe_dump(data, sort_keys=False), args.config, **context)
        for note in weight_notes(cfg) + placement_notes(cfg):
            print(f"WARNING: {note}")
        trainer = Trainer(cfg, plugins)
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        if received:  # a second signal: stop now
            raise KeyboardInterrupt
        received.append(signum)
        print(f"\n{signal.Signals(signum).name}: stopping after this round (again to abort)")
        trainer.request_stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    ctx = trainer.ctx
    finished = False
    stopped: DiskStop | None = None
    try:
        result = trainer.run()
        finished = True
    except DiskStop as e:  # the disk failed a checkpoint: the table, then the error's line
        stopped, result, finished = e, e.result, True
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        trainer.close(keep_process_group=finished and ctx.distributed)
    code = 128 + received[0] if received else 0
    if ctx.is_main:  # replicas of a torchrun job: rank 0 reports for all
        from mtrl.cli.tables import print_train_results

        print_train_results(result)
        if received and result.run_dir is not None and stopped is None:
            print(f"checkpoint written; continue with: mtrl train --resume {result.run_dir}")
    if stopped is not None:
        if ctx.distributed:  # rank 0 alone writes checkpoints, so alone stops with the error
            print(f"error: {stopped}", file=sys.stderr)
            ctx.exit_process(EXIT_USER_ERROR)
        raise stopped
    if ctx.distributed:
        ctx.exit_process(code)
    return code


def _relaunch_with_torchrun(nproc: int) -> int:
    """``mtrl train --nproc N ...`` on one node: the same command under torchrun (N replicas)."""
    if nproc < 1:
        raise UserError(f"--nproc must be >= 1, got {nproc}")
    rest, skip = [], False
    for a in sys.argv[1:]:
        if not skip and a != "--nproc" and not a.startswith("--nproc="):
            rest.append(a)
        skip = a == "--nproc"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "-m",
        "mtrl.cli",
        *rest,
    ]
    print("launching:", " ".join(cmd[1:]), flush=True)
    return subprocess.call(cmd)
