"""The running part of the learning benchmark (``benchmarks/learning.py``): each seed's
``mtrl train`` in a subprocess, then ``mtrl eval`` of its final checkpoint in another, with
the records that let ``--reuse`` skip a finished training or a finished seed, and continue an
interrupted one from its newest checkpoint (``mtrl train --resume``: a long benchmark killed
with its machine goes on where its checkpoints stopped, its wall time summed over the attempts).

Split from the command so that it stays a short read: ``learning.py`` plans (arguments, config,
overrides) and analyses; this module only runs. Every seed's failure is recorded on its
:class:`SeedRun`, never raised, so one broken seed does not lose the others.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import learning_stats as ls
import yaml


@dataclass
class Plan:
    """What to run: the resolved config mapping and where everything goes."""

    name: str
    config_path: Path
    overrides: list[str]
    data: dict[str, Any]
    tasks: list[ls.Task]
    seeds: list[int]
    work_dir: Path
    jobs: int
    eval_episodes: int
    reuse: bool
    nproc: int = 1
    """Learner replicas per training (``mtrl train --nproc``; 1: one process)."""
    extend: Path | None = None
    """The work dir of an earlier call of the benchmark at a smaller budget, same settings
    otherwise: each seed's finished run there is continued to this plan's budget
    (:func:`extended`) instead of trained again from the start."""
    eval_workers: int = 1
    """Processes each seed's evaluation plays its tasks in (``mtrl eval --workers``; the
    results do not depend on it)."""


@dataclass
class SeedRun:
    """One seed's training and evaluation, as far as it got."""

    seed: int
    run_dir: Path | None = None
    train_wall_s: float | None = None
    eval_wall_s: float | None = None
    eval: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """task -> mode -> mean return; and ``<mode>_success`` -> success rate where reported."""
    error: str | None = None
    reused: bool = False


def seed_config(plan: Plan, seed: int) -> dict[str, Any]:
    """The config one seed trains: the plan's, named after the benchmark, its runs in the work
    dir, wandb off, checkpoints on (the final one is evaluated)."""
    data = copy.deepcopy(plan.data)
    for path, value in (
        (["name"], plan.name),
        (["seed"], seed),
        (["tracking", "run_dir"], str(plan.work_dir)),
        (["tracking", "wandb", "mode"], "disabled"),
        (["checkpoint", "enabled"], True),
    ):
        ls.set_path(data, path, value)
    return data


def _mtrl(*args: str) -> list[str]:
    """The ``mtrl`` command line in this interpreter (a function, so tests can swap it)."""
    return [sys.executable, "-m", "mtrl.cli", *args]


def find_run_dir(
    stdout: str, work_dir: Path, name: str, seed: int, after: float = 0.0
) -> Path | None:
    """The run directory ``mtrl train`` printed, else the newest ``<name>__<seed>__*`` (made
    at or after the time ``after``)."""
    found = re.findall(r"^run directory: (.+)$", stdout, flags=re.M)
    if found and Path(found[-1].strip()).is_dir():
        return Path(found[-1].strip())
    dirs = sorted(
        (p for p in work_dir.glob(f"{name}__{seed}__*") if p.stat().st_mtime >= after - 1.0),
        key=lambda p: p.stat().st_mtime,
    )
    return dirs[-1] if dirs else None


HEARTBEAT_S = 30.0
"""How often a running training's wall time so far is written to its ``started`` record."""


def write_record(path: Path, doc: dict[str, Any]) -> None:
    """``doc`` as ``path``'s JSON, whole or not at all: written beside it, then renamed over
    it, so a reader (a resume, a test waiting on it) never finds it half written."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(part, path)


def _started_path(plan: Plan, seed: int) -> Path:
    return plan.work_dir / "started" / f"seed{seed}.json"


def interrupted(plan: Plan, seed: int, config_text: str) -> tuple[Path, float] | None:
    """An earlier training of this exact seed config that stopped before its end with a
    checkpoint to continue from (its run directory and the wall time it had spent), when
    ``--reuse`` is on."""
    path = _started_path(plan, seed)
    if not plan.reuse or not path.is_file():
        return None
    started = json.loads(path.read_text())
    run_dir = Path(started.get("run_dir") or "")
    if started["config"] != config_text or not started.get("run_dir"):
        return None
    if not any((run_dir / "checkpoints").glob("ckpt_*.pt")):
        return None
    return run_dir, float(started["train_wall_s"])


#: The keys where a run to extend may differ from the seed config it is continued as.
EXTENDABLE = ("name", "total_env_steps", "tracking")


def extended(plan: Plan, seed: int, config_text: str) -> str | None:
    """Start seed ``seed`` from its finished training in ``plan.extend`` (an earlier call at a
    smaller budget): its run directory is copied into this work dir and recorded as an
    interrupted training of this seed config with the earlier wall time, so that
    :func:`train` continues it (``mtrl train --resume --total-env-steps``) to this budget.
    A run that trained other settings (anything but the name, budget and tracking) is refused:
    the continued run would not be this seed config's (the reason is returned, the seed's
    error). Does nothing where this seed has started here already or where the earlier call
    has no finished training of it."""
    if plan.extend is None or _started_path(plan, seed).is_file():
        return None
    trained = plan.extend / "trained" / f"seed{seed}.json"
    if not trained.is_file():
        return None
    done = json.loads(trained.read_text())
    ours, theirs = yaml.safe_load(config_text), yaml.safe_load(done["config"])
    keys = (set(ours) | set(theirs)) - set(EXTENDABLE)
    differ = sorted(k for k in keys if ours.get(k) != theirs.get(k))
    if differ:
        return f"--extend {plan.extend}: its seed {seed} trained other {', '.join(differ)}"
    if theirs["total_env_steps"] > ours["total_env_steps"]:
        return f"--extend {plan.extend}: its seed {seed} trained past this budget"
    source = Path(done["run_dir"])
    target = plan.work_dir / source.name
    if not target.exists():
        shutil.copytree(source, target)  # a copy: the earlier call's run stays as it was
    record = {"config": config_text, "run_dir": str(target), "train_wall_s": done["train_wall_s"]}
    write_record(_started_path(plan, seed), record)
    return None


def train(plan: Plan, seed: int, config_path: Path, config_text: str) -> SeedRun:
    """``mtrl train`` of one seed in a subprocess, or ``mtrl train --resume`` of its interrupted
    run (:func:`interrupted`); its output goes to ``logs/seed<s>.train.log`` (appended to when
    resuming). While it runs, ``started/seed<s>.json`` holds its run directory and wall time."""
    log = plan.work_dir / "logs" / f"seed{seed}.train.log"
    env = {**os.environ, "WANDB_MODE": "disabled"}
    replicas = ["--nproc", str(plan.nproc)] if plan.nproc > 1 else []
    earlier = interrupted(plan, seed, config_text)
    if earlier is None:
        run_dir, spent = None, 0.0
        cmd = _mtrl("train", str(config_path), "--seed", str(seed), *replicas)
    else:
        run_dir, spent = earlier
        budget = str(yaml.safe_load(config_text)["total_env_steps"])  # an extended run's own
        cmd = _mtrl("train", "--resume", str(run_dir), "--total-env-steps", budget, *replicas)
    started = _started_path(plan, seed)
    t0 = time.perf_counter()

    def record() -> None:
        """The started record: this config, its run directory once known, wall time so far."""
        found = run_dir or find_run_dir("", plan.work_dir, plan.name, seed, after=t0_wall)
        doc = {
            "config": config_text,
            "run_dir": str(found) if found else None,
            "train_wall_s": spent + time.perf_counter() - t0,
        }
        write_record(started, doc)

    t0_wall = time.time()
    with log.open("a" if earlier else "w") as out:
        if earlier:
            out.write(f"\n--- resumed from {run_dir} after {spent:.0f} s ---\n")
            out.flush()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
        while True:
            try:
                proc.wait(timeout=HEARTBEAT_S)
                break
            except subprocess.TimeoutExpired:
                record()
    record()
    stdout = log.read_text()
    run = SeedRun(seed, train_wall_s=spent + time.perf_counter() - t0)
    run.run_dir = run_dir or find_run_dir(stdout, plan.work_dir, plan.name, seed)
    if proc.returncode != 0:
        run.error = f"mtrl train exited with {proc.returncode}; see {log}"
    elif run.run_dir is None:
        run.error = f"no run directory found; see {log}"
    return run


PRINT_LOCK = threading.Lock()


def evaluate(plan: Plan, run: SeedRun) -> None:
    """Evaluate the run's final checkpoint with ``mtrl eval --json`` (both modes) into
    ``run.eval``; the results go to ``logs/seed<s>.eval.json``.

    In a subprocess, as a user evaluates, so that the seeds of ``--jobs`` evaluate at the same
    time (MT10's 50 episodes per task and mode are minutes of a core per seed; in this process
    they took turns and left a core idle); the seconds of loading the plugins again are
    nothing beside that.
    """
    assert run.run_dir is not None
    log = plan.work_dir / "logs" / f"seed{run.seed}.eval.json"
    cmd = _mtrl("eval", str(run.run_dir), "--episodes", str(plan.eval_episodes), "--json")
    cmd += ["--workers", str(plan.eval_workers)]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    run.eval_wall_s = time.perf_counter() - t0
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 0:  # one seed's broken checkpoint must not lose the other seeds
        why = lines[-1] if lines else f"exit {proc.returncode}"
        run.error = f"eval of {run.run_dir}: {why.removeprefix('error: ')}"
        return
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        run.error = f"eval of {run.run_dir}: no JSON on its output ({proc.stdout[-200:]!r})"
        return
    doc["warnings"] = [ln.removeprefix("warning: ") for ln in lines if ln.startswith("warning: ")]
    log.write_text(json.dumps(doc, indent=2) + "\n")
    for r in doc["results"]:
        modes = run.eval.setdefault(r["task"], {})
        modes[r["mode"]] = r["mean_return"]
        if r.get("success_rate") is not None:  # an env that reports success (Meta-World)
            modes[f"{r['mode']}_success"] = r["success_rate"]


def _done_path(plan: Plan, seed: int) -> Path:
    return plan.work_dir / "done" / f"seed{seed}.json"


def reused(plan: Plan, seed: int, config_text: str) -> SeedRun | None:
    """An earlier finished run of this exact seed config and eval, when ``--reuse`` is on."""
    path = _done_path(plan, seed)
    if not plan.reuse or not path.is_file():
        return None
    done = json.loads(path.read_text())
    if done["config"] != config_text or done["eval_episodes"] != plan.eval_episodes:
        return None
    if not Path(done["run_dir"]).is_dir():
        return None
    return SeedRun(
        seed,
        Path(done["run_dir"]),
        done["train_wall_s"],
        done["eval_wall_s"],
        done["eval"],
        reused=True,
    )


def _trained_path(plan: Plan, seed: int) -> Path:
    return plan.work_dir / "trained" / f"seed{seed}.json"


def reused_training(plan: Plan, seed: int, config_text: str) -> SeedRun | None:
    """An earlier finished training of this exact seed config (its evaluation may have failed
    or not run), when ``--reuse`` is on: only the evaluation is then done again."""
    path = _trained_path(plan, seed)
    if not plan.reuse or not path.is_file():
        return None
    done = json.loads(path.read_text())
    if done["config"] != config_text or not Path(done["run_dir"]).is_dir():
        return None
    return SeedRun(seed, Path(done["run_dir"]), done["train_wall_s"], reused=True)


def run_seed(plan: Plan, seed: int) -> SeedRun:
    """Train and evaluate one seed (or reuse a finished one); never raises for a failed run."""
    config_text = yaml.safe_dump(seed_config(plan, seed), sort_keys=False)
    run = reused(plan, seed, config_text)
    if run is None:
        run = reused_training(plan, seed, config_text)
        if run is None:
            config_path = plan.work_dir / "configs" / f"seed{seed}.yaml"
            config_path.write_text(config_text)
            why = extended(plan, seed, config_text)
            run = SeedRun(seed, error=why) if why else train(plan, seed, config_path, config_text)
            if run.error is None:
                trained = {
                    "config": config_text,
                    "run_dir": str(run.run_dir),
                    "train_wall_s": run.train_wall_s,
                }
                write_record(_trained_path(plan, seed), trained)
        if run.error is None:
            evaluate(plan, run)
        if run.error is None:
            done = {
                "config": config_text,
                "eval_episodes": plan.eval_episodes,
                "run_dir": str(run.run_dir),
                "train_wall_s": run.train_wall_s,
                "eval_wall_s": run.eval_wall_s,
                "eval": run.eval,
            }
            write_record(_done_path(plan, seed), done)
    if run.reused or run.train_wall_s is None:
        how = "reused" if run.reused else "not trained"
    else:
        how = f"train {run.train_wall_s:.0f} s"
    with PRINT_LOCK:
        print(f"[seed {seed}] {run.error or 'ok'} ({how}): {run.run_dir}", flush=True)
    return run


def in_progress(plan: Plan) -> list[SeedRun]:
    """Each seed's training as far as it has got, neither trained on nor evaluated: its run
    directory and wall time from its started record (for a report of a long benchmark while
    it runs, or between the sittings it is resumed in). Seeds not started yet are left out."""
    runs = []
    for seed in plan.seeds:
        path = _started_path(plan, seed)
        if not path.is_file():
            continue
        started = json.loads(path.read_text())
        if started.get("run_dir") and Path(started["run_dir"]).is_dir():
            runs.append(SeedRun(seed, Path(started["run_dir"]), float(started["train_wall_s"])))
    return runs


def run_all(plan: Plan) -> list[SeedRun]:
    """Every seed, ``plan.jobs`` at a time, in seed order."""
    for sub in ("configs", "logs", "started", "trained", "done"):
        (plan.work_dir / sub).mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=plan.jobs) as pool:
        return list(pool.map(lambda s: run_seed(plan, s), plan.seeds))
