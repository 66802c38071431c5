"""Population Based Training (``mtrl tune``) against independent runs of the shipped config.

    .venv/bin/python benchmarks/pbt_vs_independent.py [--repeats 2] [--population 4] \\
        [--total-env-steps N] [--interval-env-steps 100000] [--metric target] \\
        [--out-dir docs/results] [--work-dir /tmp/pbt_vs_independent_XXXX] \\
        [--first-repeat R] [--name pbt_vs_independent]
    # writes docs/results/<name>.json; runs and logs stay in the work dir

Each repeat trains two arms of ``--population`` N runs of ``configs/quickstart.yaml``, one arm
after the other (which goes first alternates between repeats):

* **PBT**: the quickstart plus a ``tune:`` section (synchronous PBT, or asynchronous with
  ``--asynchronous``; N members, an exploit / explore every ``--interval-env-steps``; the
  search space, :data:`SEARCH`, is centred
  on the shipped values: the learning rate, the entropy weight, and the learning-rate scales of
  the two tasks the shipped config scales), seed ``100 (r + 1)``, trained by ``mtrl tune`` in a
  private network namespace (Ray stays on loopback; :mod:`mtrl.testing.netns`). Ray gives
  every member an equal share of the CPUs, so the N members train at once.
* **independent**: N ``mtrl train`` runs of the shipped config (seeds ``N r .. N r + N - 1``),
  all N started at once as subprocesses, so they share the machine as the members do.

Both arms train N runs of ``total_env_steps`` each (the quickstart's unless overridden): the
same total env steps, on the same machine, at the same time. Each arm's wall clock runs from
the moment its processes are started to the moment the last one has exited.

Time is measured on one clock for both arms: while an arm trains, this process reads every
run's ``metrics.jsonl`` once a second (:class:`RecordClock`) and stamps each record with the
seconds since the arm started when it first saw it (records are written every
``tracking.log_every_s``, 10 s in the quickstart, and flushed at once). The records' own
``charts/elapsed_s`` will not do for PBT: a member's trainer is rebuilt every interval and
goes on from the checkpoint's ``elapsed_s`` — after an exploit the *copied* member's — and
leaves out the time between intervals (building the trainer, waiting for the other members).

Per run, from its records (each PBT member's mtrl run directory, each independent run's): for
each task the first record whose return (mean of its last 20 episodes) is at ``target_score``
(:func:`learning_stats.first_crossing`, the learning benchmark's rule), with the task's env
steps and the arm's seconds there; *time to every target*, the latest of those (None if a task
never got there); the final return (last record) per task normalised as the learning benchmark
does, ``(R - random) / (target - random)``, and the IQM and mean of those over the tasks. Per
arm: the best run (every target soonest; ties and runs that never got there by the final
normalised mean), and the IQM over all its runs x tasks with 95% stratified-bootstrap CIs
(rliable, :func:`learning_stats.aggregate`). The target: PBT's best member at every target
sooner than the best independent run, with a final IQM no lower.

``tune.metric`` is ``target`` by default: each task's way from random to its own
``target_score``, so breakout (about 5 at target) counts as much as InvertedPendulum (950);
``return`` would let the largest returns decide and ``normalized_score`` needs reference scores
that ``minatar/breakout`` and ``InvertedPendulum-v5`` do not register. All members start from
the same network weights (the config's seed), and their env seeds differ
(:mod:`mtrl.tune.member`).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import learning_stats as ls
from _common import machine, write_result
from arm_figures import RecordClock, arm_summary, run_figures, verdict
from learning import _git
from learning_runs import find_run_dir
from pbt_report import ARMS, repeat_table, summary_lines

from mtrl.plugins import get_plugins
from mtrl.testing.netns import can_unshare, in_private_network
from mtrl.tune.history import member_label, read_population

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "configs" / "quickstart.yaml"

SEARCH: dict[str, dict[str, list[float]]] = {
    "learner.learning_rate": {"log_uniform": [5.0e-4, 4.5e-3]},  # shipped 1.5e-3, x3 each way
    "learner.entropy_coef": {"uniform": [0.003, 0.03]},  # the learner's default 0.01
    "tasks.0.learning_rate_scale": {"choice": [0.25, 0.5, 1.0]},  # CartPole: shipped 0.5
    "tasks.1.learning_rate_scale": {"choice": [1.0, 2.0, 4.0]},  # breakout: shipped 2
}
"""What the population searches: the hyperparameters the shipped config sets by hand."""


# ---------------------------------------------------------------------------------------------
# running the arms


@dataclass
class Setup:
    """What every repeat shares."""

    data: dict[str, Any]
    """The shipped config as plain data, with ``total_env_steps`` set."""
    tasks: list[ls.Task]
    population: int
    interval: int
    metric: str
    synchronous: bool
    work_dir: Path
    timeout_s: float
    poll_s: float


@dataclass
class Arm:
    """One arm of one repeat as it ran."""

    name: str
    seeds: list[int]
    dir: Path
    wall_s: float | None = None
    started_at_s: float | None = None
    """Seconds since the benchmark started, when the arm started."""
    errors: list[str] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)


def _env() -> dict[str, str]:
    return {**os.environ, "WANDB_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def _mtrl(*args: str) -> list[str]:
    return [sys.executable, "-m", "mtrl.cli", *args]


def _wait_all(procs: list[subprocess.Popen[bytes]], timeout_s: float) -> list[int | None]:
    """Wait for every process; past ``timeout_s`` interrupt each one's group (SIGINT, as
    Ctrl-C; ``mtrl tune`` then saves and exits), then kill what is left after 60 s. The exit
    codes (None: still alive after the kill)."""
    deadline = time.monotonic() + timeout_s
    try:
        for p in procs:
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                break
    finally:  # also on Ctrl-C here: the children have their own sessions and miss it
        _stop_all(procs)
    return [p.returncode for p in procs]


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """Interrupt each live process's group, then kill what is left after 60 s."""
    for sig, grace in ((signal.SIGINT, 60.0), (signal.SIGKILL, 10.0)):
        live = [p for p in procs if p.poll() is None]
        for p in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, sig)
        deadline = time.monotonic() + grace
        for p in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(deadline - time.monotonic(), 0.1))


def _start(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child holds its own descriptor
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(), start_new_session=True
        )


def pbt_config(setup: Setup, seed: int) -> dict[str, Any]:
    """The population's config: the shipped one with a ``tune:`` section and ``seed``."""
    data = copy.deepcopy(setup.data)
    data.update(name="quickstart_pbt", seed=seed)
    data["tune"] = {
        "algorithm": "pbt",
        "population": setup.population,
        "interval_env_steps": setup.interval,
        "synchronous": setup.synchronous,
        "metric": setup.metric,
        "search": copy.deepcopy(SEARCH),
    }
    return data


def _write_config(data: dict[str, Any], path: Path) -> Path:
    """Write ``data`` to ``path`` after validating it as ``mtrl`` will (fails before a run)."""
    text = yaml.safe_dump(data, sort_keys=False)
    ls.validate(data, str(path), **get_plugins().config_context())
    path.write_text(text)
    return path


def run_pbt(setup: Setup, arm: Arm, t_bench: float) -> list[tuple[str, Path, Any]]:
    """``mtrl tune`` of the population; (label, run dir, member history) of each member."""
    arm.dir.mkdir(parents=True)
    cfg = _write_config(pbt_config(setup, arm.seeds[0]), arm.dir / "pbt.yaml")
    cmd = in_private_network(_mtrl("tune", str(cfg), "--dir", str(arm.dir)))
    t0 = time.perf_counter()
    arm.started_at_s = t0 - t_bench
    clock = RecordClock(arm.dir, "quickstart_pbt/*/run/*/metrics.jsonl", t0, setup.poll_s).start()
    try:
        (rc,) = _wait_all([_start(cmd, arm.dir / "tune.log")], setup.timeout_s)
    finally:
        arm.wall_s = time.perf_counter() - t0
        clock.stop()
        clock.save(arm.dir / "clock.json")
    if rc != 0:
        arm.errors.append(f"mtrl tune exited with {rc}; see {arm.dir / 'tune.log'}")
    exp = arm.dir / "quickstart_pbt"
    members = {m.run_dir: m for m in read_population(exp)} if exp.is_dir() else {}
    out = []
    for run_dir, (records, stamps) in sorted(clock.runs().items()):
        m = members.get(run_dir)
        trial = run_dir.parent.parent.name
        out.append((member_label(trial), run_dir, (records, stamps, m)))
    return out


def run_independent(setup: Setup, arm: Arm, t_bench: float) -> list[tuple[str, Path, Any]]:
    """N ``mtrl train`` of the shipped config at once; (label, run dir, records) of each."""
    arm.dir.mkdir(parents=True)
    data = copy.deepcopy(setup.data)
    data.setdefault("tracking", {})["run_dir"] = str(arm.dir / "runs")
    cfg = _write_config(data, arm.dir / "quickstart.yaml")
    t0 = time.perf_counter()
    arm.started_at_s = t0 - t_bench
    clock = RecordClock(arm.dir / "runs", "*/metrics.jsonl", t0, setup.poll_s).start()
    logs = [arm.dir / f"seed{s}.log" for s in arm.seeds]
    try:
        procs = [
            _start(_mtrl("train", str(cfg), "--seed", str(s)), log)
            for s, log in zip(arm.seeds, logs, strict=True)
        ]
        codes = _wait_all(procs, setup.timeout_s)
    finally:
        arm.wall_s = time.perf_counter() - t0
        clock.stop()
        clock.save(arm.dir / "clock.json")
    seen = clock.runs()
    out = []
    for s, log, rc in zip(arm.seeds, logs, codes, strict=True):
        run_dir = find_run_dir(log.read_text(errors="replace"), arm.dir / "runs", data["name"], s)
        if rc != 0:
            arm.errors.append(f"seed {s}: mtrl train exited with {rc}; see {log}")
        if run_dir is None:
            arm.errors.append(f"seed {s}: no run directory; see {log}")
            continue
        records, stamps = seen.get(run_dir, ([], []))
        out.append((f"seed {s}", run_dir, (records, stamps, None)))
    return out


def analyse_arm(setup: Setup, arm: Arm, found: list[tuple[str, Path, Any]]) -> None:
    """Fill ``arm.runs`` with each run's figures."""
    for label, run_dir, (records, stamps, member) in found:
        fig = run_figures(setup.tasks, records, stamps)
        fig.update(label=label, run_dir=str(run_dir))
        if member is not None:
            last = member.intervals[-1] if member.intervals else None
            fig["hyperparameters"] = None if last is None else last.hyperparameters
            starts = [0, *(i.env_steps for i in member.intervals[:-1])]
            fig["copied"] = [
                {"from": member_label(i.copied_from), "at_env_steps": s}
                for s, i in zip(starts, member.intervals, strict=True)
                if i.copied_from is not None
            ]
            fig["intervals"] = len(member.intervals)
        if not records:
            fig["error"] = "no metrics records"
        arm.runs.append(fig)
    if len(arm.runs) != len(arm.seeds) and arm.name == "pbt":
        arm.errors.append(f"{len(arm.runs)} member run(s) found of {len(arm.seeds)}")
    if arm.errors:  # a failed arm: its runs stay in the JSON but none is the best
        for r in arm.runs:
            r.setdefault("error", "; ".join(arm.errors))


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2, help="repeats of both arms (2)")
    ap.add_argument(
        "--first-repeat",
        type=int,
        default=0,
        help="number the repeats from here (0): its seeds and arm order, so a later call "
        "adds repeats unlike the earlier ones",
    )
    ap.add_argument("--name", default="pbt_vs_independent", help="result name")
    ap.add_argument("--population", type=int, default=4, help="runs per arm (4)")
    ap.add_argument("--total-env-steps", type=int, help="per run (default: the quickstart's)")
    ap.add_argument("--interval-env-steps", type=int, default=100_000, help="PBT interval (100000)")
    ap.add_argument(
        "--metric",
        choices=("target", "return", "normalized_score"),
        default="target",
        help="tune.metric (target: each task's way to its target_score; normalized_score "
        "needs reference scores the quickstart's envs do not register)",
    )
    ap.add_argument(
        "--asynchronous",
        action="store_true",
        help="tune.synchronous: false (only members that copy restart; the others keep "
        "their actors between intervals)",
    )
    ap.add_argument("--out-dir", type=Path, default=None, help="JSON here (docs/results)")
    ap.add_argument("--work-dir", type=Path, help="runs and logs (default: a new /tmp dir)")
    ap.add_argument("--timeout-s", type=float, default=4 * 3600, help="per arm (4 h)")
    ap.add_argument("--poll-s", type=float, default=1.0, help="metrics reading interval (1)")
    ap.add_argument("--reps", type=int, default=10_000, help="bootstrap replications")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.repeats < 1 or args.population < 2 or args.first_repeat < 0:
        print("error: --repeats >= 1, --population >= 2, --first-repeat >= 0", file=sys.stderr)
        return 2
    if not can_unshare():
        print("warning: no private network namespace here; Ray runs on the host's network")
    data = yaml.safe_load(QUICKSTART.read_text())
    if args.total_env_steps is not None:
        data["total_env_steps"] = args.total_env_steps
    data.setdefault("tracking", {}).setdefault("wandb", {})["mode"] = "disabled"
    plugins = get_plugins()
    cfg = ls.validate(data, str(QUICKSTART), **plugins.config_context())
    tasks = [
        ls.Task(t.key, t.env, t.target_score, plugins.envs.get(t.env).random_score)
        for t in cfg.tasks
    ]
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="pbt_vs_independent_", dir="/tmp"))
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    setup = Setup(
        data,
        tasks,
        args.population,
        args.interval_env_steps,
        args.metric,
        not args.asynchronous,
        work,
        args.timeout_s,
        args.poll_s,
    )
    n = args.population
    print(
        f"PBT (population {n}) vs {n} independent runs of {QUICKSTART.name}: "
        f"{cfg.total_env_steps} env steps each, interval {args.interval_env_steps}, "
        f"{args.repeats} repeat(s); work dir {work}",
        flush=True,
    )
    info, t_bench = machine(), time.perf_counter()
    repeats = []
    for r in range(args.first_repeat, args.first_repeat + args.repeats):
        order = list(ARMS) if r % 2 == 0 else list(reversed(ARMS))
        arms = {
            "pbt": Arm("pbt", [100 * (r + 1)] * n, work / f"r{r}" / "pbt"),
            "independent": Arm(
                "independent", list(range(n * r, n * r + n)), work / f"r{r}" / "independent"
            ),
        }
        for name in order:
            arm = arms[name]
            print(f"[repeat {r}] {name}: seeds {sorted(set(arm.seeds))} in {arm.dir}", flush=True)
            runner = run_pbt if name == "pbt" else run_independent
            found = runner(setup, arm, t_bench)
            analyse_arm(setup, arm, found)
            print(
                f"[repeat {r}] {name}: {arm.wall_s:.0f} s, {len(arm.runs)} runs"
                + (f"; errors: {arm.errors}" if arm.errors else ""),
                flush=True,
            )
        entry: dict[str, Any] = {"repeat": r, "order": order, "arms": {}}
        for name, arm in arms.items():
            entry["arms"][name] = {
                **asdict(arm),
                "dir": str(arm.dir),
                "summary": arm_summary(tasks, arm.runs, args.reps, seed=r),
            }
        entry["verdict"] = verdict(
            entry["arms"]["pbt"]["summary"], entry["arms"]["independent"]["summary"]
        )
        repeats.append(entry)
        print(repeat_table(tasks, entry), flush=True)
    lines = summary_lines(repeats)
    print("\n".join(lines))
    payload = {
        "benchmark": "pbt_vs_independent",
        "config": str(QUICKSTART.relative_to(ROOT)),
        "total_env_steps": cfg.total_env_steps,
        "population": n,
        "interval_env_steps": args.interval_env_steps,
        "metric": args.metric,
        "synchronous": not args.asynchronous,
        "search": SEARCH,
        "pbt_config_repeat_0": pbt_config(setup, 100),
        "tasks": [asdict(t) for t in tasks],
        "private_network": can_unshare(),
        "poll_s": args.poll_s,
        "work_dir": str(work),
        "repeats": repeats,
        "target_met": [r["verdict"]["met"] for r in repeats],
        "wall_s_total": time.perf_counter() - t_bench,
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "machine": info,
    }
    print(f"wrote {write_result(args.name, payload, args.out_dir)}; runs in {work}")
    failed = any(arm["errors"] for rep in repeats for arm in rep["arms"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
