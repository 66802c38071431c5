"""Sample efficiency on CartPole-v1 (or Acrobot-v1, MinAtar breakout): env steps and seconds to a
target mean return, over seeds.

Stable-Baselines3 PPO out of the box (default MlpPolicy, 8 envs, torch's default threads),
PufferLib 3's PPO (pufferl, 8 envs × 128 steps per epoch, CleanRL's CartPole settings) and
mtrl tuned for time to the target (serial actor, 16 envs, one unroll of each per update, lr
4e-3; the benchmark's matched 4,675-parameter network) take turns, seed by seed,
each in its own venv's python through the same drivers as ``run.py``. A run stops after
``--seconds`` of training; "reached" is the first time the mean of the last 20 episodes is at
least 475, in env steps and in seconds since the first unroll.

Usage: ``.venv/bin/python benchmarks/peers/sample_efficiency.py [--env cartpole] [--seeds 5]
[--seconds 40]``.
Writes ``docs/results/peers_sample_efficiency.json`` (``--name`` another file in docs/results).
Targets: mtrl's median steps to 475 no more than SB3's in the same run, and its median seconds to
475 a third of SB3's or fewer. The side ``mtrl_ppo`` is the PPO plugin
(``plugins_contrib/mtrl-ppo``, its ``configs/ppo_cartpole.yaml``; run with a python where the
plugin is installed); its target: median steps to 475 no more than SB3's PPO. Each side's
median and IQM of the steps to 475, over the seeds that reached it, come with 95% stratified
bootstrap intervals (rliable, when installed: ``mtrl[bench]``).

``--env acrobot`` and ``--env breakout`` run PPO against PPO on two more envs, with the same
protocol (the mean of the last 20 episodes against the env's target: −100 on Acrobot-v1, 5 on
MinAtar breakout, the quickstart's target) and write ``docs/results/peers_ppo_<env>.json``.
Acrobot: SB3's PPO with rl-baselines3-zoo's tuned settings for Acrobot-v1 against the plugin's
``configs/ppo_acrobot.yaml``. Breakout: SB3 has no tuned settings for MinAtar, so its PPO runs
with the plugin's ``configs/ppo_minatar_breakout.yaml`` settings and network, stepping the same
game (``minatar/breakout`` of plugins_contrib/mtrl-minatar, in the ``sb3_minatar`` venv).
Both sides use one torch thread there.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import machine, write_result  # noqa: E402
from run import run_one  # noqa: E402
from venvs import ensure, python_of  # noqa: E402

print = functools.partial(print, flush=True)

MTRL_SIDE = "mtrl_serial_16"
SB3_SIDE = "sb3_ppo_default"
PUFFER_SIDE = "pufferlib_ppo_8"
PPO_SIDE = "mtrl_ppo"
PPO_CONFIGS = HERE.parents[1] / "plugins_contrib" / "mtrl-ppo" / "configs"
PPO_CONFIG = PPO_CONFIGS / "ppo_cartpole.yaml"
SB3_ZOO_SIDE = "sb3_ppo_zoo"
SB3_MATCHED_SIDE = "sb3_ppo_matched"

#: name -> (peer, driver arguments, what it is)
SIDES: dict[str, tuple[str, list[str], str]] = {
    SB3_SIDE: (
        "sb3",
        ["--envs", "8", "--net", "default", "--threads", "0"],
        "SB3 PPO out of the box: default MlpPolicy (separate 64-64 pi and vf), 8 envs, "
        "n_steps 128, batch 256, 4 epochs, torch's default threads",
    ),
    PUFFER_SIDE: (
        "pufferlib",
        ["--backend", "serial", "--envs", "8", "--horizon", "128"],
        "PufferLib 3 pufferl PPO, Serial vecenv 8 envs, horizon 128 (1,024 steps/epoch), 4 "
        "epochs x 4 minibatches, Adam 2.5e-4, shared tanh MLP 4-64-64 (4,675 params)",
    ),
    # Chosen on seeds 0 and 1 from envs {8, 16} x unroll {10, 20} x lr {1e-3, 2e-3, 4e-3}
    # (docs/BENCHMARKS.md); measured on other seeds (--first-seed).
    MTRL_SIDE: (
        "mtrl",
        ["--mode", "serial", "--envs", "16", "--batch", "16", "--lr", "0.004"],
        "mtrl serial, 16 envs, unroll 20, batch 16 unrolls (320 steps/update), lr 4e-3, "
        "shared tanh MLP 4-64-64 (4,675 params)",
    ),
    PPO_SIDE: (
        "mtrl",
        ["--config", str(PPO_CONFIG)],
        "mtrl's PPO plugin (plugins_contrib/mtrl-ppo, configs/ppo_cartpole.yaml): serial actor, "
        "8 envs x 128 steps per update, 4 epochs x 4 minibatches, lr 3e-4, shared tanh MLP "
        "4-64-64 with a 64 torso layer (8,835 params)",
    ),
}


#: PPO against PPO beyond CartPole: --env -> its sides, as SIDES.
PPO_SIDES: dict[str, dict[str, tuple[str, list[str], str]]] = {
    "acrobot": {
        SB3_ZOO_SIDE: (
            "sb3",
            [
                *("--env", "acrobot", "--envs", "16", "--n-steps", "256", "--batch", "64"),
                *("--epochs", "4", "--gae-lambda", "0.94", "--gamma", "0.99", "--ent-coef", "0"),
                *("--normalize", "--net", "default", "--threads", "1"),
            ],
            "SB3 PPO with rl-baselines3-zoo's Acrobot-v1 settings: 16 envs, n_steps 256, "
            "batch 64, 4 epochs, GAE lambda 0.94, gamma 0.99, ent_coef 0, VecNormalize (obs "
            "and reward, the zoo's normalize: true), SB3 defaults otherwise (lr 3e-4, clip 0.2, "
            "MlpPolicy: separate 64-64 tanh pi and vf, 9,476 params); 1 torch thread",
        ),
        PPO_SIDE: (
            "mtrl",
            ["--env", "acrobot", "--config", str(PPO_CONFIGS / "ppo_acrobot.yaml")],
            "mtrl's PPO plugin (configs/ppo_acrobot.yaml): serial actor, 16 envs x 128 steps "
            "per update, 4 epochs x 32 minibatches of 64, GAE lambda 0.94, gamma 0.99, no "
            "entropy bonus, lr 3e-4, PopArt, shared tanh MLP 6-64-64 (9,028 params); "
            "OMP_NUM_THREADS=1",
        ),
    },
    "breakout": {
        SB3_MATCHED_SIDE: (
            "sb3",
            [
                *("--env", "breakout", "--envs", "16", "--n-steps", "128", "--batch", "256"),
                *("--epochs", "4", "--lr", "0.002", "--ent-coef", "0.01", "--net", "minatar"),
                *("--threads", "1"),
            ],
            "SB3 PPO with the mtrl config's settings (no tuned SB3 settings exist for MinAtar): "
            "16 envs, n_steps 128, batch 256, 4 epochs, lr 2e-3, ent_coef 0.01, GAE lambda "
            "0.95, gamma 0.99, clip 0.2; conv 16 3x3 -> Linear 128 (ReLU) shared by linear "
            "heads (132,308 params); minatar/breakout through mtrl.plugins.SingleCopyEnv; "
            "1 torch thread",
        ),
        PPO_SIDE: (
            "mtrl",
            ["--env", "breakout", "--config", str(PPO_CONFIGS / "ppo_minatar_breakout.yaml")],
            "mtrl's PPO plugin (configs/ppo_minatar_breakout.yaml): serial actor, 16 envs x 128 "
            "steps per update, 4 epochs x 8 minibatches of 256, lr 2e-3, entropy 0.01, no PopArt; "
            "the same conv network (132,308 params); OMP_NUM_THREADS=1",
        ),
    },
}
#: --env -> (what the result calls the env, its target, the default result name)
ENVS = {
    "cartpole": ("CartPole-v1 (gymnasium)", 475.0, "peers_sample_efficiency"),
    "acrobot": ("Acrobot-v1 (gymnasium)", -100.0, "peers_ppo_acrobot"),
    "breakout": (
        "minatar/breakout (plugins_contrib/mtrl-minatar, MinAtar 1.0.15)",
        5.0,
        "peers_ppo_breakout",
    ),
}
#: Sides whose peer runs in another venv than the peer's own.
VENV_OF = {SB3_MATCHED_SIDE: "sb3_minatar"}


def sides_of(env: str) -> dict[str, tuple[str, list[str], str]]:
    """The sides that can run on ``env``."""
    return SIDES if env == "cartpole" else PPO_SIDES[env]


def spread(values: list[float]) -> dict[str, float] | None:
    """Median, min and max (None for no values)."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def intervals(values: list[float]) -> dict[str, dict[str, float]] | None:
    """Median and IQM of ``values`` with 95% stratified-bootstrap intervals (rliable); None
    without rliable or with fewer than 2 values."""
    if len(values) < 2 or importlib.util.find_spec("rliable") is None:
        return None
    import numpy as np
    from learning_stats import bootstrap
    from rliable import metrics

    runs = np.asarray(values, np.float64)[:, None]  # runs x 1 task
    points, cis = bootstrap(
        runs, lambda x: np.array([np.median(x), metrics.aggregate_iqm(x)]), 10_000, 0
    )
    return {
        key: {"point": float(points[k]), "ci_low": float(cis[0, k]), "ci_high": float(cis[1, k])}
        for k, key in enumerate(("median", "iqm"))
    }


def summarise(runs: list[dict[str, Any]], tag: str = "475") -> dict[str, Any]:
    """Per side: how many seeds reached the target, and steps and seconds to it over those
    seeds (keys ``steps_to_<tag>``: ``475`` on CartPole, ``target`` elsewhere)."""
    hit = [r["solved_at"] for r in runs if r.get("solved_at")]
    return {
        "seeds": len(runs),
        "reached": len(hit),
        f"steps_to_{tag}": spread([h["env_steps"] for h in hit]),
        f"steps_to_{tag}_intervals": intervals([h["env_steps"] for h in hit]),
        f"seconds_to_{tag}": spread([h["seconds"] for h in hit]),
        "final_mean_return": spread([r["mean_return"] for r in runs if r.get("mean_return")]),
    }


def ppo_targets(summary: dict[str, Any]) -> dict[str, bool]:
    """Beyond CartPole: the PPO plugin's median steps to the target no more than SB3's PPO's."""
    sb3 = next((summary[k] for k in (SB3_ZOO_SIDE, SB3_MATCHED_SIDE) if k in summary), None)
    ppo = summary.get(PPO_SIDE)
    if not (sb3 and ppo):
        return {}
    mine, theirs = ppo["steps_to_target"], sb3["steps_to_target"]
    # SB3 at the target in no seed: its median lies past the window, beyond any of PPO's.
    at_most = bool(mine and (theirs is None or mine["median"] <= theirs["median"]))
    return {
        "ppo_steps_at_most_sb3": at_most,
        "ppo_reached_every_seed": ppo["reached"] == ppo["seeds"],
    }


def targets(summary: dict[str, Any]) -> dict[str, bool]:
    """The targets whose sides ran: mtrl's (IMPALA) and the PPO plugin's against SB3."""
    sb3 = summary.get(SB3_SIDE)
    out: dict[str, bool] = {}

    def fewer_steps(side: dict[str, Any]) -> bool:
        both = sb3["steps_to_475"] and side["steps_to_475"]
        return bool(both and side["steps_to_475"]["median"] <= sb3["steps_to_475"]["median"])

    mine = summary.get(MTRL_SIDE)
    if sb3 and mine:
        out["mtrl_steps_at_most_sb3"] = fewer_steps(mine)
        out["mtrl_seconds_a_third_of_sb3"] = bool(
            sb3["seconds_to_475"]
            and mine["seconds_to_475"]
            and 3 * mine["seconds_to_475"]["median"] <= sb3["seconds_to_475"]["median"]
        )
        out["mtrl_reached_every_seed"] = mine["reached"] == mine["seeds"]
    ppo = summary.get(PPO_SIDE)
    if sb3 and ppo:
        out["ppo_steps_at_most_sb3"] = fewer_steps(ppo)
        out["ppo_reached_every_seed"] = ppo["reached"] == ppo["seeds"]
    return out


def _fmt(s: dict[str, float] | None, scale: float = 1.0, unit: str = "", f: str = ",.0f") -> str:
    if s is None:
        return "—"
    med, lo, hi = (format(s[k] / scale, f) for k in ("median", "min", "max"))
    return f"{med}{unit} [{lo}, {hi}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", choices=sorted(ENVS), default="cartpole")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=40.0, help="training seconds per run")
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed, ... (0)")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/results")
    ap.add_argument(
        "--name",
        default=None,
        help="result file's name (peers_sample_efficiency; peers_ppo_<env> beyond CartPole)",
    )
    ap.add_argument(
        "--sides",
        default=None,
        help=f"comma-separated subset of {', '.join(SIDES)} on CartPole, of "
        f"{', '.join(PPO_SIDES['acrobot'])} on Acrobot, of {', '.join(PPO_SIDES['breakout'])} "
        "on breakout (default all; SB3's and mtrl's are needed for the targets)",
    )
    a = ap.parse_args()
    label, target, result_name = ENVS[a.env]
    tag = "475" if a.env == "cartpole" else "target"
    known = sides_of(a.env)
    sides = {k: known[k] for k in (a.sides.split(",") if a.sides else known)}
    for venv in {VENV_OF.get(k, peer) for k, (peer, _, _) in sides.items()} - {"mtrl"}:
        ensure(venv)
    out: dict[str, Any] = {
        "machine": machine(),
        "env": label,
        **({} if a.env == "cartpole" else {"target": target}),
        "seconds_per_run": a.seconds,
        "sides": {k: v[2] for k, v in sides.items()},
        "runs": {k: [] for k in sides},
    }
    t0 = time.perf_counter()
    for seed in range(a.first_seed, a.first_seed + a.seeds):
        for name, (peer, args, _) in sides.items():
            load = os.getloadavg()[0]
            venv = VENV_OF.get(name)
            python = str(python_of(venv)) if venv else None
            r = run_one(peer, [*args, "--seed", str(seed)], 0.0, a.seconds, python)
            r.update(seed=seed, load_avg_1min_before=load)
            out["runs"][name].append(r)
            s = r.get("solved_at")
            got = f"{s['env_steps'] / 1e3:,.0f}k steps, {s['seconds']:.1f} s" if s else "—"
            print(
                f"{name} seed {seed}: {target:g} at {got}; end {r.get('mean_return')} "
                f"(load {load:.1f})"
            )
    out["total_wall_s"] = time.perf_counter() - t0
    out["summary"] = {k: summarise(v, tag) for k, v in out["runs"].items()}
    out["targets"] = targets(out["summary"]) if a.env == "cartpole" else ppo_targets(out["summary"])
    t = f"{target:g}"
    print(f"\n| side | reached {t} | env steps to {t} (median [min, max]) | seconds to {t} |")
    print("|---|---:|---|---|")
    for name, s in out["summary"].items():
        print(
            f"| {name} | {s['reached']}/{s['seeds']} | {_fmt(s[f'steps_to_{tag}'], 1e3, 'k')} | "
            f"{_fmt(s[f'seconds_to_{tag}'], f='.1f')} s |"
        )
    for name, s in out["summary"].items():
        ci = s[f"steps_to_{tag}_intervals"]
        if ci:
            print(
                f"{name}: steps to {t} (95% bootstrap CI, rliable): "
                + "; ".join(
                    f"{k} {v['point'] / 1e3:,.0f}k [{v['ci_low'] / 1e3:,.0f}k, "
                    f"{v['ci_high'] / 1e3:,.0f}k]"
                    for k, v in ci.items()
                )
            )
    print(f"targets: {out['targets']}; {out['total_wall_s']:.0f} s in all")
    if not a.no_write:
        print(f"written to {write_result(a.name or result_name, out)}")


if __name__ == "__main__":
    main()
