"""The pure parts of the learning benchmark (``benchmarks/learning.py``): config overrides,
learning curves from metrics records, first crossing of a target, normalised scores, and
aggregates with stratified-bootstrap confidence intervals from ``rliable``
(Agarwal et al. 2021, "Deep RL at the edge of the statistical precipice").

No subprocesses and no training here: every function takes data and returns data (the plot
writes one PNG), so the tests can feed synthetic records.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import yaml

from mtrl.config import ExperimentConfig, parse_config
from mtrl.tracking.report_episodes import rolling_mean

Record = Mapping[str, Any]
PathPart = str | int
_EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")

# ---------------------------------------------------------------------------------------------
# config overrides


def parse_override(text: str) -> tuple[list[PathPart], Any]:
    """``"learner.learning_rate=3e-4"`` → ``(["learner", "learning_rate"], 0.0003)``.

    The value is parsed as YAML (``1e-3``, ``true``, ``[1, 2]``, ``null``); a path part that
    is a non-negative integer indexes a list (``tasks.0.num_envs=8``).
    """
    path, sep, raw = text.partition("=")
    parts = path.strip().split(".") if path.strip() else []
    if not sep or not parts or any(not p for p in parts):
        raise ValueError(f"--set {text!r}: expected DOTTED.PATH=VALUE, e.g. learner.gamma=0.99")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ValueError(f"--set {text!r}: the value is not valid YAML: {e}") from None
    if isinstance(value, str) and _EXPONENT.fullmatch(value.strip()):
        value = float(value)  # YAML 1.1 reads 1e-3 (no dot) as a string
    return [int(p) if p.isdigit() else p for p in parts], value


def set_path(data: dict[str, Any], path: Sequence[PathPart], value: Any) -> None:
    """Set ``data[path[0]][path[1]]... = value`` in place, creating missing mappings; an int
    part indexes an existing list item. Raises ValueError naming the part that cannot be."""
    node: Any = data
    for depth, part in enumerate(path):
        where = ".".join(map(str, path[: depth + 1]))
        if isinstance(node, list):
            if not isinstance(part, int) or part >= len(node):
                raise ValueError(f"{where}: no such list item (the list has {len(node)})")
        elif not isinstance(node, dict):
            raise ValueError(f"{where}: its parent is a {type(node).__name__}, not a mapping")
        if depth == len(path) - 1:
            node[part] = value
            return
        if isinstance(node, dict) and node.get(part) is None:
            node[part] = {}
        node = node[part]


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """A deep copy of the config mapping ``data`` with every ``PATH=VALUE`` of ``overrides``
    set (see :func:`parse_override` and :func:`set_path`).

    Whether a key exists in the config schema is :func:`validate`'s job: a misspelt key is
    set here and rejected there, with a did-you-mean.
    """
    out = copy.deepcopy(dict(data))
    for text in overrides:
        path, value = parse_override(text)
        try:
            set_path(out, path, value)
        except ValueError as e:
            raise ValueError(f"--set {text!r}: {e}") from None
    return out


def validate(
    data: Mapping[str, Any], source: str, **known: Iterable[str] | None
) -> ExperimentConfig:
    """Validate the config mapping ``data`` as ``mtrl train`` would (``known``: what
    :meth:`mtrl.plugins.Plugins.config_context` gives :func:`mtrl.config.parse_config`, so a
    plugin's learning rule and its ``learner.<rule>:`` section pass too); raises
    :class:`mtrl.errors.ConfigError` naming ``source`` and the bad key."""
    return parse_config(yaml.safe_dump(dict(data), sort_keys=False), source, **known)


# ---------------------------------------------------------------------------------------------
# curves and per-task figures


@dataclass(frozen=True)
class Curve:
    """One task's learning curve in one run: the task's env steps, the run's wall seconds and
    the mean return of its last 20 episodes, at every metrics record that has a return."""

    steps: np.ndarray
    seconds: np.ndarray
    returns: np.ndarray

    def __len__(self) -> int:
        return len(self.returns)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def extract_curve(records: Sequence[Record], task: str) -> Curve:
    """The curve of ``task`` from metrics records (``task/<task>/return``, ``.../env_steps``,
    ``charts/elapsed_s``); records without a finite return are skipped."""
    steps, seconds, returns = [], [], []
    for rec in records:
        ret = _number(rec.get(f"task/{task}/return"))
        step = _number(rec.get(f"task/{task}/env_steps"))
        if ret is None or step is None:
            continue
        steps.append(step)
        seconds.append(_number(rec.get("charts/elapsed_s")) or math.nan)
        returns.append(ret)
    return Curve(np.asarray(steps), np.asarray(seconds), np.asarray(returns))


def final_success(records: Sequence[Record], task: str) -> float | None:
    """The last ``task/<task>/success`` of the records (the share of the task's last 20
    training episodes that succeeded); None when the env reports no success."""
    for rec in reversed(records):
        value = _number(rec.get(f"task/{task}/success"))
        if value is not None:
            return value
    return None


def first_crossing(curve: Curve, target: float | None) -> tuple[float, float] | None:
    """(task env steps, wall seconds) of the first point whose return is ``>= target``;
    None when it never gets there or there is no target."""
    if target is None:
        return None
    hits = np.flatnonzero(curve.returns >= target)
    if not len(hits):
        return None
    i = int(hits[0])
    return float(curve.steps[i]), float(curve.seconds[i])


def final_over_best(final: float, best: float, random: float | None = None) -> float | None:
    """How much of its best a run kept: final/best where the best return is positive. Where
    returns are negative (Pendulum, Acrobot) the ratio is measured from the random score:
    ``(final - random) / (best - random)``, when one is declared and the best is above it.
    None otherwise."""
    if best > 0:
        return final / best
    if random is not None and best > random:
        return (final - random) / (best - random)
    return None


EPISODE_WINDOW = 100
"""Episodes behind the second final/best (``final_over_best_100``), from ``episodes.csv``: the
published MinAtar curves' window. The logged figure's best is the top of ~10 noisy 20-episode
windows, which sits above the level a run holds by up to ~2 standard errors (breakout: ~6 % of
its return each)."""


def window_final_over_best(
    returns: Sequence[float] | np.ndarray, window: int = EPISODE_WINDOW, random: float | None = None
) -> float | None:
    """:func:`final_over_best` of ``window``-episode means: the mean of the last ``window``
    episodes against the best such mean anywhere in the run. None with fewer episodes."""
    if window < 1 or len(returns) < window:
        return None
    means = rolling_mean(np.asarray(returns, np.float64), window)[window - 1 :]  # full windows
    return final_over_best(float(means[-1]), float(means.max()), random)


def task_figures(curve: Curve, target: float | None, random: float | None = None) -> dict[str, Any]:
    """Final (last point) and best return, :func:`final_over_best` (``random``: the env's
    random score, if declared), the task's env steps at the end, and env steps and wall seconds
    when the return first reached ``target``."""
    if not len(curve):
        return {
            "final": None,
            "best": None,
            "final_over_best": None,
            "env_steps": None,
            "steps_to_target": None,
            "seconds_to_target": None,
        }
    final, best = float(curve.returns[-1]), float(curve.returns.max())
    hit = first_crossing(curve, target)
    return {
        "final": final,
        "best": best,
        "final_over_best": final_over_best(final, best, random),
        "env_steps": float(curve.steps[-1]),
        "steps_to_target": hit[0] if hit else None,
        "seconds_to_target": hit[1] if hit else None,
    }


def solved_at_end(final: float | None, greedy: float | None, target: float | None) -> bool | None:
    """Both the last-20 training return and the greedy eval return at ``target`` (None when
    there is no target)."""
    if target is None:
        return None
    return final is not None and greedy is not None and final >= target and greedy >= target


def spread(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """Median, min and max of the values that are not None, and how many there were."""
    arr = np.asarray([v for v in values if v is not None], np.float64)
    if not len(arr):
        return {"median": None, "min": None, "max": None, "n": 0}
    return {
        "median": float(np.median(arr)),
        "min": float(arr.min()),
        "max": float(arr.max()),
        "n": len(arr),
    }


# ---------------------------------------------------------------------------------------------
# normalised scores and rliable aggregates


def normalise(score: float, random: float, target: float) -> float:
    """``(score - random) / (target - random)``: 0 at the random score, 1 at the target."""
    if target == random:
        raise ValueError(f"target {target} equals the random score: cannot normalise")
    return (score - random) / (target - random)


def bootstrap(
    scores: np.ndarray, func: Callable[[np.ndarray], np.ndarray], reps: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """rliable's stratified bootstrap of ``func`` over a (runs x columns) matrix: the point
    estimates and the (2 x ...) 95% interval."""
    from rliable import library as rly

    # rliable's resampling draws from numpy's global RNG (its ``random_state`` argument only
    # reaches arch, which does not draw the indices): seed that, and put it back afterwards.
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        points, intervals = rly.get_interval_estimates(
            {"x": np.asarray(scores, np.float64)}, func, reps=reps
        )
    finally:
        np.random.set_state(saved)
    return np.asarray(points["x"]), np.asarray(intervals["x"])


def aggregate(scores: np.ndarray, reps: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """IQM and mean of a (runs x tasks) matrix of normalised scores with 95% stratified
    bootstrap CIs (rliable). Rows with a missing (NaN) score are left out; ``runs`` says how
    many were used."""
    from rliable import metrics

    scores = np.asarray(scores, np.float64)
    if scores.ndim != 2:
        raise ValueError(f"scores must be a (runs x tasks) matrix, got shape {scores.shape}")
    kept = scores[np.isfinite(scores).all(axis=1)]
    if not kept.size:
        return {"runs": 0, "tasks": scores.shape[1], "iqm": None, "mean": None}
    points, cis = bootstrap(
        kept,
        lambda x: np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x)]),
        reps,
        seed,
    )
    out: dict[str, Any] = {"runs": int(kept.shape[0]), "tasks": int(kept.shape[1])}
    for k, key in enumerate(("iqm", "mean")):
        out[key] = {
            "point": float(points[k]),
            "ci_low": float(cis[0, k]),
            "ci_high": float(cis[1, k]),
        }
    return out


# ---------------------------------------------------------------------------------------------
# a suite over seeds


@dataclass(frozen=True)
class Task:
    """A task of the suite as the benchmark needs it: its name (``name`` or env id), env id,
    target score and the env's declared random score (None: not declared, 0 is used)."""

    name: str
    env: str
    target: float | None
    random: float | None = None

    @property
    def floor(self) -> float:
        """The score normalisation starts from: the random score, else 0."""
        return self.random or 0.0

    @property
    def scored(self) -> bool:
        """Whether the task has a target to normalise by (and so enters the aggregates)."""
        return self.target is not None and self.target != self.floor


def seed_figures(
    tasks: Sequence[Task],
    records: Sequence[Record],
    evals: Mapping[str, Mapping[str, float | None]],
    episodes: Mapping[str, Sequence[float] | np.ndarray] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per task of one run: :func:`task_figures` from its metrics ``records``,
    :func:`window_final_over_best` of its episode returns (``episodes[task]``, in order; None
    without), the ``greedy`` and ``stochastic`` eval returns (``evals[task][mode]``),
    :func:`solved_at_end` and, for an env that reports success, the success rate of the last
    training episodes (:func:`final_success`) and of the greedy eval (``greedy_success``)."""
    out = {}
    for t in tasks:
        fig = task_figures(extract_curve(records, t.name), t.target, t.random)
        returns = (episodes or {}).get(t.name)
        fig["final_over_best_100"] = (
            None if returns is None else window_final_over_best(returns, random=t.random)
        )
        modes = evals.get(t.name, {})
        fig["greedy"], fig["stochastic"] = modes.get("greedy"), modes.get("stochastic")
        fig["final_success"] = final_success(records, t.name)
        fig["greedy_success"] = modes.get("greedy_success")
        fig["solved_at_end"] = solved_at_end(fig["final"], fig["greedy"], t.target)
        out[t.name] = fig
    return out


SUMMARY_KEYS = (
    "final",
    "best",
    "final_over_best",
    "final_over_best_100",
    "greedy",
    "stochastic",
    "steps_to_target",
    "seconds_to_target",
    "final_success",
    "greedy_success",
)


def summarise(
    tasks: Sequence[Task], runs: Sequence[Mapping[str, Mapping[str, Any]]]
) -> dict[str, dict[str, Any]]:
    """Per task, over the runs (each :func:`seed_figures`): :func:`spread` of every figure,
    the number of seeds and how many were solved at the end."""
    out = {}
    for t in tasks:
        figs = [r[t.name] for r in runs]
        row: dict[str, Any] = {k: spread(f[k] for f in figs) for k in SUMMARY_KEYS}
        row["seeds"] = len(figs)
        row["solved_at_end"] = sum(bool(f["solved_at_end"]) for f in figs)
        out[t.name] = row
    return out


def normalised_matrix(
    tasks: Sequence[Task], runs: Sequence[Mapping[str, Mapping[str, Any]]], key: str
) -> np.ndarray:
    """(runs x tasks) :func:`normalise` d scores of figure ``key`` (``final``, ``greedy``, ...)
    of scored tasks; NaN where a run has none."""
    out = np.full((len(runs), len(tasks)), np.nan)
    for i, run in enumerate(runs):
        for j, t in enumerate(tasks):
            score = run[t.name][key]
            if score is not None and t.target is not None:
                out[i, j] = normalise(score, t.floor, t.target)
    return out


def suite_aggregates(
    tasks: Sequence[Task],
    runs: Sequence[Mapping[str, Mapping[str, Any]]],
    reps: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """:func:`aggregate` of the normalised final and greedy returns over the scored tasks."""
    scored = [t for t in tasks if t.scored]
    out: dict[str, Any] = {"tasks": [t.name for t in scored], "reps": reps, "bootstrap_seed": seed}
    if scored and runs:
        for key in ("final", "greedy"):
            out[key] = aggregate(normalised_matrix(scored, runs, key), reps, seed)
    return out


def _fmt(s: Mapping[str, Any], f: str = ".1f") -> str:
    if s["median"] is None:
        return "-"
    return f"{s['median']:{f}} [{s['min']:{f}}, {s['max']:{f}}]"


def format_report(name: str, summary: Mapping[str, Any], aggregates: Mapping[str, Any]) -> str:
    """The per-task table (median [min, max] over seeds) and the aggregates, as text."""
    lines = [f"{name}: median [min, max] over seeds"]
    for task, row in summary.items():
        n, hit = row["seeds"], row["steps_to_target"]
        lines += [
            "",
            f"{task} ({n} seeds; solved at end: {row['solved_at_end']}/{n})",
            f"  {'final':<18}{_fmt(row['final'])}",
            f"  {'best':<18}{_fmt(row['best'])}",
            f"  {'final/best':<18}{_fmt(row['final_over_best'], '.2f')}",
            f"  {'final/best (100)':<18}{_fmt(row['final_over_best_100'], '.2f')}",
            f"  {'greedy eval':<18}{_fmt(row['greedy'])}",
            f"  {'stochastic eval':<18}{_fmt(row['stochastic'])}",
            f"  {'steps to target':<18}{_fmt(hit, ',.0f')} ({hit['n']}/{n} reached)",
        ]
        if any(row[k]["median"] is not None for k in ("final_success", "greedy_success")):
            lines += [
                f"  {'success (train)':<18}{_fmt(row['final_success'], '.2f')}",
                f"  {'success (greedy)':<18}{_fmt(row['greedy_success'], '.2f')}",
            ]
    over = ", ".join(aggregates["tasks"]) or "no task with a target"
    lines += ["", f"normalised score over {over}"]
    for key in ("final", "greedy"):
        a = aggregates.get(key)
        if not a or a["iqm"] is None:
            continue
        for stat in ("iqm", "mean"):
            s = a[stat]
            lines.append(
                f"  {key:<7}{stat:<5}{s['point']:.3f}  95% CI [{s['ci_low']:.3f}, "
                f"{s['ci_high']:.3f}]  ({a['runs']} runs x {a['tasks']} tasks)"
            )
    return "\n".join(lines)
