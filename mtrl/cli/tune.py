"""``mtrl tune``: population-based training of a config's runs (its ``tune:`` section)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mtrl.cli.exit_codes import EXIT_INTERRUPTED
from mtrl.errors import UserError


def cmd_tune(args: argparse.Namespace) -> int:
    """Train a population of runs of CONFIG with population-based training on Ray Tune (its
    tune: section says what to search); prints each member's hyperparameters and score, and
    writes DIR/NAME/members.csv. --resume continues the population in DIR/NAME. Interrupted
    (Ctrl-C), it says how to continue and exits 130."""
    from mtrl.cli.validate import check_tune_metric
    from mtrl.config import load_config
    from mtrl.plugins import get_plugins
    from mtrl.tune.runner import run_population

    plugins = get_plugins()
    cfg = load_config(
        args.config,
        **plugins.config_context(),
    )
    if cfg.tune is None:
        raise UserError(f"{args.config}: no tune: section (what to search; docs/TUNE.md)")
    check_tune_metric(cfg, plugins, args.config)
    fixed = [
        f
        for f, v in (("--population", args.population), ("--total-env-steps", args.total_env_steps))
        if v is not None
    ]
    if args.resume and fixed:
        raise UserError(
            f"--resume continues the population as it was started; {' and '.join(fixed)} "
            "cannot change it (start a new one with another --dir)"
        )
    if args.population is not None:
        cfg = cfg.model_copy(
            update={"tune": cfg.tune.model_copy(update={"population": args.population})}
        )
    if args.total_env_steps is not None:
        cfg = cfg.model_copy(update={"total_env_steps": args.total_env_steps})
    path, members = run_population(cfg, Path(args.dir), resume=args.resume)
    ranked = sorted(members, key=lambda m: -(m.score if m.score is not None else float("-inf")))
    print(f"population of {len(members)} in {path}")
    for m in ranked:
        values = ", ".join(f"{k}={v:.4g}" for k, v in sorted(m.hyperparameters.items()))
        score = "-" if m.score is None else f"{m.score:.3f}"
        print(f"  {m.trial}: score {score} at {m.env_steps} env steps ({values})")
    behind = [m for m in members if (m.env_steps or 0) < cfg.total_env_steps]
    if behind:  # Ctrl-C: Ray Tune saved the population's state and returned
        least = min(m.env_steps or 0 for m in behind)
        print(
            f"interrupted: {len(behind)} member(s) short of {cfg.total_env_steps} env steps "
            f"(the least at {least}); continue with: mtrl tune {args.config} --dir {args.dir} "
            "--resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    return 0
