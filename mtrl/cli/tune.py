"""``mtrl tune``: population-based training of a config's runs (its ``tune:`` section)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mtrl.errors import UserError


def cmd_tune(args: argparse.Namespace) -> int:
    """Train a population of runs of CONFIG with population-based training on Ray Tune (its
    tune: section says what to search); prints each member's hyperparameters and score, and
    writes DIR/NAME/members.csv. --resume continues the population in DIR/NAME."""
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
    return 0
