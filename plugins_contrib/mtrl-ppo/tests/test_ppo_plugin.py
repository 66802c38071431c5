"""The plugin as a user meets it: discovered through its entry point (``mtrl plugins``), its
settings model, and bad input refused in one line with exit status 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from mtrl_ppo.plugin import check_config, make_ppo_learner
from mtrl_ppo.settings import PpoSettings
from pydantic import ValidationError

from mtrl.plugins import load_plugins


def _mtrl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``mtrl ARGS`` in a subprocess with the built-in plugins and this one only."""
    env = {**os.environ, "MTRL_PLUGINS": "ppo", "WANDB_MODE": "disabled"}
    return subprocess.run(
        [sys.executable, "-m", "mtrl.cli", *args],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        cwd=cwd,
    )


HERE = Path(__file__).resolve().parent
CONFIGS = HERE.parent / "configs"


def test_the_rule_is_found_through_its_entry_point() -> None:
    (ep,) = [e for e in metadata.entry_points(group="mtrl") if e.name == "ppo"]
    assert ep.value == "mtrl_ppo.plugin"
    plugins = load_plugins()
    spec = plugins.algorithms.get("ppo")
    assert spec.plugin == "ppo" and spec.factory is make_ppo_learner
    assert plugins.infos["ppo"].status == "ok"
    out = _mtrl("plugins")
    assert out.returncode == 0, out.stderr
    assert "mtrl-ppo" in out.stdout and "algorithms: ppo" in out.stdout


def test_the_settings_have_defaults_and_refuse_unknown_keys() -> None:
    s = PpoSettings()
    assert (s.clip, s.epochs, s.minibatches, s.gae_lambda) == (0.2, 4, 4, 0.95)
    assert s.value_clip is None and s.normalize_advantages
    with pytest.raises(ValidationError, match="clp"):
        PpoSettings.model_validate({"clp": 0.1})
    with pytest.raises(ValidationError, match="gae_lambda"):
        PpoSettings(gae_lambda=1.5)
    assert all(f.description for f in PpoSettings.model_fields.values()), "every field documented"


def test_the_host_validates_the_rules_section_with_file_and_line(tmp_path: Path) -> None:
    text = (CONFIGS / "ppo_cartpole.yaml").read_text()
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace("  algorithm: ppo\n", "  algorithm: ppo\n  ppo: {clp: 0.1}\n"))
    out = _mtrl("validate", str(path))
    assert out.returncode == 2
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1) if "clp" in x)
    assert f"bad.yaml:{line}" in out.stdout + out.stderr
    assert "learner.ppo.clp" in out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_a_parallel_mode_is_refused_in_one_line(tmp_path: Path) -> None:
    text = (CONFIGS / "ppo_cartpole.yaml").read_text()
    path = tmp_path / "dp.yaml"
    path.write_text(
        text.replace("  algorithm: ppo\n", "  algorithm: ppo\n  parallel: {data_parallel: 2}\n")
    )
    out = _mtrl("validate", str(path))
    assert out.returncode == 2
    said = (out.stdout + out.stderr).strip()
    assert "learning rule 'ppo' does not support learner.parallel data_parallel" in said
    assert "Traceback" not in said


def test_a_recurrent_core_is_refused_in_one_line(tmp_path: Path) -> None:
    text = (CONFIGS / "ppo_cartpole.yaml").read_text()
    path = tmp_path / "core.yaml"
    text = text.replace("activation: tanh}", "activation: tanh, core: gru}")
    path.write_text(text + "checkpoint: {enabled: false}\n")
    out = _mtrl("train", str(path), cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert "ppo shuffles single steps and has no recurrent core" in out.stdout + out.stderr


@pytest.mark.parametrize("command", ["validate", "train"])
def test_combining_the_tasks_gradients_is_refused_in_one_line(tmp_path: Path, command: str) -> None:
    """PPO's minibatches mix the tasks into one loss: a gradient combination is refused by
    the rule's own check (validate and train alike), not silently ignored."""
    text = (CONFIGS / "ppo_cartpole.yaml").read_text()
    path = tmp_path / "pcgrad.yaml"
    path.write_text(
        text.replace("  algorithm: ppo\n", "  algorithm: ppo\n  multitask: {gradients: pcgrad}\n")
        + "checkpoint: {enabled: false}\n"
    )
    out = _mtrl(command, str(path), cwd=tmp_path)
    said = (out.stdout + out.stderr).strip()
    assert out.returncode == 2, said
    assert "learner.multitask.gradients: pcgrad is not supported by ppo" in said
    assert "Traceback" not in said


def test_famos_loss_weighting_is_refused_by_the_rules_own_check() -> None:
    """FAMO needs positive losses that measure progress; PPO's policy-gradient loss is not:
    one line, not silently ignored."""
    from mtrl.config import LearnerConfig

    cfg = LearnerConfig.model_validate({"multitask": {"loss_weighting": "famo"}})
    (line,) = check_config(cfg, None)
    assert line.startswith("learner.multitask.loss_weighting: famo is not supported by ppo")
    assert check_config(LearnerConfig(), None) == []


def test_the_factory_takes_the_validated_section_as_a_seventh_argument() -> None:
    """The host hands the rule its validated ``learner.ppo:`` section as the seventh
    argument; a config without one gets the model's defaults."""
    from gymnasium import spaces

    from mtrl.config import LearnerConfig
    from mtrl.learner.model import MultiTaskModel, TaskSpaces

    cfg = LearnerConfig()
    box = spaces.Box(-1.0, 1.0, (3,))
    model = MultiTaskModel([TaskSpaces(box, spaces.Discrete(2))], cfg.model)
    mine = PpoSettings(epochs=1, value_clip=0.5)
    learner = make_ppo_learner(model, cfg, ["t"], None, None, None, mine)
    assert learner.settings is mine
    from mtrl.algorithms import make_learner
    from mtrl.config import parse_config
    from mtrl.learner.distributed import DistContext
    from mtrl.plugins import get_plugins

    plugins = get_plugins()
    text = "tasks: [{env: gymnasium/CartPole-v1}]\nlearner: {algorithm: ppo}\n"
    cfg = parse_config(text, **plugins.config_context()).learner
    model = MultiTaskModel([TaskSpaces(box, spaces.Discrete(2))], cfg.model)
    built = make_learner(plugins, model, cfg, ["t"], DistContext(), None, None)
    assert built.settings == PpoSettings()
