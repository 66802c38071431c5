"""``mtrl eval`` and ``mtrl report``: what a trained run achieved, as evaluation episodes of
its checkpointed agent or as figures of the metrics it recorded."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate a trained agent: N episodes per task with greedy and/or stochastic actions;
    mean ± std return and normalised score per task, as a table or JSON."""
    import warnings

    from mtrl.train.evaluate import MODES, evaluate, load_for_eval

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ckpt = load_for_eval(args.target)  # a skipped corrupt checkpoint warns: say so plainly
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    modes = MODES if args.mode == "both" else (args.mode,)
    results = evaluate(
        ckpt,
        tasks=args.tasks,
        episodes=args.episodes,
        modes=modes,
        seed=args.seed,
        device=args.device,
        workers=args.workers,
    )
    if args.json:
        doc = {
            "checkpoint": str(ckpt.path),
            "env_steps": ckpt.env_steps,
            "episodes": args.episodes,
            "results": [r.to_json() for r in results],
        }
        print(json.dumps(doc, indent=2))
        return 0
    from mtrl.cli.tables import print_eval

    print_eval(ckpt, results)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Write PNG figures (learning curves, throughput, actors, policy lag, PopArt σ, losses,
    the learner's per-task diagnostics) from the metrics of one or several run directories,
    overlaid for comparison. A population's directory (``mtrl tune``) stands for its members'
    runs, and adds population.png (each member's score and hyperparameters over env steps,
    its exploits marked) and a table of the members."""
    from mtrl.tracking.report import write_report
    from mtrl.tune.history import is_population, read_population
    from mtrl.tune.report import member_table, write_population_figure

    run_dirs: list[Path] = []
    populations = []
    for d in map(Path, args.run_dirs):
        if is_population(d):
            members = read_population(d)
            populations.append((d, members))
            run_dirs.extend(m.run_dir for m in members)
        else:
            run_dirs.append(d)
    output = args.output
    if output is None and len(args.run_dirs) == 1 and populations:
        output = populations[0][0] / "plots"
    written = write_report(
        run_dirs, output, note=lambda line: print(f"note: {line}", file=sys.stderr)
    )
    for d, members in populations:
        print(f"population {d}:")
        for line in member_table(members):
            print(f"  {line}")
        out = Path(output) if output is not None else Path("report")
        if len(populations) > 1:
            out = out / d.name
        written.append(write_population_figure(members, out))
    for path in written:
        print(path)
    if not written:
        print("no figures: the runs have no plottable metrics yet", file=sys.stderr)
    return 0
