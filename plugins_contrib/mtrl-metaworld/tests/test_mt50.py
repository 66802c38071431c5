"""configs/mt50.yaml: all fifty Meta-World v3 tasks, in Meta-World's order, and a run of it
through ``mtrl train`` for a tiny budget (its model as shipped; the budget, the replay ratio, the
replay's warm-up and size and the records' places cut down) that trains, finishes and writes its
metrics and checkpoint. Building the fifty envs takes most of the test's time (Meta-World draws
each task's fifty goals, about a second per task)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

if importlib.util.find_spec("mtrl_metaworld") is None:  # pragma: no cover - install hint
    pytest.skip(
        "mtrl-metaworld is not installed: pip install -e plugins_contrib/mtrl-metaworld",
        allow_module_level=True,
    )

import yaml
from mtrl_metaworld.tasks import MT50

from mtrl.checkpoint import CHECKPOINT_DIR
from mtrl.cli import main
from mtrl.config import load_config
from mtrl.plugins import get_plugins

CONFIG = Path(__file__).parents[3] / "configs" / "mt50.yaml"


def test_mt50_holds_every_task_in_meta_worlds_order() -> None:
    cfg = load_config(CONFIG, **get_plugins().config_context())
    assert [t.env for t in cfg.tasks] == [f"metaworld/{name}" for name in MT50]
    assert cfg.learner.algorithm == "sac"


@pytest.mark.timeout(300)
def test_mt50_trains_end_to_end_on_a_tiny_budget(tmp_path: Path) -> None:
    """Two rounds of every task's unrolls (50 x 25 env steps each), gradient steps from the
    first; the run ends, logs the learner's losses and each task's figures, and checkpoints."""
    raw = yaml.safe_load(CONFIG.read_text())
    raw["total_env_steps"] = 2500
    raw["learner"]["sac"]["learning_starts"] = 10
    raw["learner"]["sac"]["replay_ratio"] = 8  # ~40 gradient steps: building 50 envs dominates
    raw["replay"]["capacity"] = 1000
    raw["checkpoint"] = {"every_env_steps": None, "every_s": None}
    raw["tracking"] = {
        **raw["tracking"],
        "run_dir": str(tmp_path / "runs"),
        "console": "quiet",
        "log_every_s": 0.01,
        "final_eval_episodes": 0,
    }
    path = tmp_path / "mt50.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["train", str(path)]) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]
    trained = [r for r in records if r.get("sac/gradient_steps", 0) > 0]
    assert trained, records[-1]
    assert trained[-1]["sac/ready_tasks"] == 50
    assert any("learner/metaworld/window-close-v3/q" in r for r in records)
    assert list((run_dir / CHECKPOINT_DIR).glob("*.pt")), sorted(run_dir.iterdir())
