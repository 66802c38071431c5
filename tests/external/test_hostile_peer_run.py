"""A real training run beside hostile simulations: CartPole trains on while external tasks'
codes answer garbage, a 1 GiB frame, wrong sizes, floods of stale replies or silence.

The hostile code (``hostile_sim.py``, one task per behaviour) is launched by mtrl like any
coupled code, through a plugin installed the way a third party's is (an entry point on
PYTHONPATH, so that the forkserver's actors load it too). The run (``hostile_run.py``, in its
own process) ends once every hostile task has settled and the healthy one has trained on; then,
from ``trainer.pool.faults``: every fault of a hostile task is counted under its kind with a
message naming the env and what went wrong; a task is quarantined when its simulation fails
before any unroll, and restarted again and again (never quarantined) when each simulation
delivers unrolls before it fails; the healthy task has no fault and keeps training well past
the first hostile fault; no process of a hostile code outlives the run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.external.conftest import HERE, install_plugin, wait_gone

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

PLUGIN = f"""
import gymnasium as gym
import numpy as np

from mtrl.plugins import hookimpl
from mtrl.plugins.external import ExternalSim

COMMAND = (
    "{{python}} -X mtrl_marker={{marker}} {HERE / "hostile_sim.py"} {{address}} "
    "--behaviour {{behaviour}} --at {{at}} --seed {{seed}}"
)


@hookimpl
def mtrl_register_envs(register):
    sim = ExternalSim(command=COMMAND, defaults={{"behaviour": "silence", "at": 1, "marker": ""}})
    obs = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    act = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    register.env("peer", sim, observation_space=obs, action_space=act)
"""

MAX_RESTARTS = 2
RESTARTS = 3  # a task that keeps restarting: this many restarts settle it
GROW = 5000  # healthy env steps after the last hostile task settled

# behaviour, the STEP it misbehaves at, fault kind, what the message says, quarantined
CASES = [
    ("garbage", 1, "raise", "ProtocolError", "header frame has", True),
    ("huge", 1, "raise", "SimulationDisconnected", "max_message_bytes=67108864", True),
    ("sizes", 1, "raise", "ProtocolError", "frames have [21, 8, 2, 2] bytes", True),
    ("flood", 1, "hang", "SimulationTimeout", "no answer to STEP within 2s", True),
    # at STEP 40: four unrolls of 8 before each fault, so failures stay under half the attempts
    ("silence", 40, "hang", "SimulationTimeout", "no answer to STEP within 2s", False),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the ``hostile`` plugin and the metadata that registers its entry point."""
    return install_plugin(tmp_path_factory.mktemp("site"), "hostile", PLUGIN)


def _config(tmp_path: Path, marker: str) -> Path:
    hostile = "".join(
        f"""
  - env: hostile/peer
    name: {behaviour}
    num_envs: 2
    env_kwargs: {{behaviour: {behaviour}, at: {at}, marker: {marker}, step_timeout_s: 2}}"""
        for behaviour, at, *_ in CASES
    )
    path = tmp_path / "hostile.yaml"
    path.write_text(f"""
name: hostile
seed: 0
total_env_steps: 100000000  # a ceiling: the run ends on its condition (hostile_run.py)
actors: {{mode: process, start_method: forkserver}}
scheduler: {{num_actors: {1 + len(CASES)}, max_restarts: {MAX_RESTARTS}, step_timeout_s: 30}}
learner: {{unroll_length: 8, batch_size: 8, model: {{encoder_dim: 16, torso: [16]}}}}
checkpoint: {{enabled: false}}
tracking: {{run_dir: {tmp_path}/runs, console: quiet, log_every_s: 0.5, csv: false,
           wandb: {{mode: disabled}}, final_eval_episodes: 1}}
tasks:
  - {{env: gymnasium/CartPole-v1, name: healthy, num_envs: 4}}{hostile}
""")
    return path


def _train(site: Path, config: Path) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "MTRL_PLUGINS": "hostile",
        "WANDB_MODE": "offline",
    }
    cmd = [sys.executable, str(HERE / "hostile_run.py"), str(config)]
    cmd += ["--restarts", str(RESTARTS), "--grow", str(GROW), "--deadline-s", "300"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=390, env=env)
    out = proc.stdout + proc.stderr
    results = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and results, out[-4000:]
    return json.loads(results[-1][len("RESULT ") :])


def test_hostile_simulations_are_counted_and_isolated_while_the_healthy_task_trains(
    site: Path, tmp_path: Path
) -> None:
    marker = uuid.uuid4().hex[:10]
    res = _train(site, _config(tmp_path, marker))
    assert res["at_settled"] is not None, f"a hostile task never settled: {res['faults']}"
    run_dir = Path(res["run_dir"])
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    steps, evals = res["env_steps"], res["greedy_eval"]
    for i, (behaviour, at, kind, error, says, quarantined) in enumerate(CASES, start=1):
        f = res["faults"][i]
        assert f["faults"] >= MAX_RESTARTS + 1, (behaviour, f)
        assert f["by_kind"][kind] == f["faults"], f"{behaviour}: every fault is a {kind}: {f}"
        assert f["last_kind"] == kind, (behaviour, f)
        text = f["last_error"]
        assert text.split(": ", 1)[0].rsplit(".", 1)[-1] == error, text
        assert ": hostile/peer (process 0): " in text, "the message names the env"
        assert says in text, text
        if kind == "hang" or behaviour == "huge":  # the code's last words are quoted
            assert f"| hostile_sim: {behaviour} at STEP {at}" in text, text
        if quarantined:
            assert f["quarantined"], (behaviour, f)
            assert f["faults"] == MAX_RESTARTS + 1 and f["restarts"] == MAX_RESTARTS, f
            assert f["reason"].startswith(f"task '{behaviour}' quarantined: 3 of its 3 unroll")
            assert steps[behaviour] == 0, f"{behaviour}: no unroll reached the learner"
            assert evals[behaviour] is None, f"{behaviour}: a quarantined task is not evaluated"
        else:
            assert not f["quarantined"], f["reason"]
            assert f["restarts"] >= RESTARTS, (behaviour, f)
            delivered = (at - 1) // 8 * 8 * 2  # env steps of the unrolls before each fault
            assert steps[behaviour] >= delivered * f["faults"], "each simulation delivered"
        assert last[f"task/{behaviour}/faults/{kind}"] == f["faults"]
        assert last[f"task/{behaviour}/quarantined"] == float(quarantined)

    logs = [p.read_text() for p in (run_dir / "sim-logs").glob("*/*.log")]  # a folder a task
    assert len(logs) >= sum(f["faults"] for f in res["faults"]), "each launch kept its own log"
    for behaviour, at, *_ in CASES:
        assert any(f"hostile_sim: {behaviour} at STEP {at}" in log for log in logs), behaviour

    healthy = res["faults"][0]
    assert healthy["faults"] == 0 and not healthy["quarantined"], healthy
    assert last["task/healthy/faults"] == 0
    first = res["at_first_fault"]
    assert steps["healthy"] >= first + GROW, (first, steps)
    assert evals["healthy"] is not None, "the run finished with its evaluation"
    assert not wait_gone(marker, set(), timeout=30), "no process of a hostile code is left"
