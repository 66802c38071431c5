"""The guide's examples work as printed: its BatchEnv conforms, its tracker logs runs."""

from __future__ import annotations

import importlib
import json
import re
import types
from pathlib import Path

import pytest

from mtrl.config import parse_config
from mtrl.plugins import hookimpl, load_plugins
from mtrl.testing import check_env
from mtrl.tracking import make_sinks, tracker_factories


def test_guide_batch_env_example_conforms() -> None:
    guide = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    block = next(
        b for b in re.findall(r"```python\n(.*?)```", guide, re.S) if "class ChainBatchEnv" in b
    )
    namespace: dict = {}
    exec(compile(block, "docs/plugins.md", "exec"), namespace)

    @hookimpl
    def mtrl_register_envs(register):
        register.env("Chain-v0", namespace["ChainBatchEnv"])

    plugins = load_plugins(
        autoload=False,
        extra={"guide": types.SimpleNamespace(mtrl_register_envs=mtrl_register_envs)},
    )
    report = check_env(plugins.envs.get("guide/Chain-v0"), steps=200)
    assert report.episode_ends > 0
    assert report.skipped["spawn"].startswith("env registered in-process only")


def test_guide_tracker_example_logs_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    guide = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    block = next(
        b
        for b in re.findall(r"```python\n(.*?)```", guide, re.S)
        if "def mtrl_register_trackers" in b
    )
    namespace: dict = {}
    exec(compile(block, "docs/plugins.md", "exec"), namespace)
    monkeypatch.setenv("MTRL_DISABLE_PLUGINS", "gymnasium,envpool,pettingzoo,tensor,chaos")
    plugins = load_plugins(
        autoload=False,
        extra={
            "mylog": types.SimpleNamespace(
                mtrl_register_trackers=namespace["mtrl_register_trackers"]
            )
        },
    )
    assert plugins.infos["mylog"].trackers == ["shared-log"]
    cfg = parse_config(
        "tasks:\n  - env: gymnasium/CartPole-v1\n"
        "tracking:\n  trackers: [shared-log]\n  wandb: {mode: disabled}\n",
        tracker_names=plugins.trackers.names(),
    )
    monkeypatch.delenv("SHARED_LOG", raising=False)
    assert len(make_sinks(cfg, None, ["t"], tracker_factories(cfg, plugins), console="quiet")) == 0

    log = tmp_path / "all-runs.jsonl"
    monkeypatch.setenv("SHARED_LOG", str(log))
    for run in ("run-a", "run-b"):
        (tmp_path / run).mkdir()
        sinks = make_sinks(
            cfg, tmp_path / run, ["t"], tracker_factories(cfg, plugins), console="quiet"
        )
        sinks.write({"charts/env_steps": 10})
        sinks.close()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines == [
        {"run": "run-a", "charts/env_steps": 10},
        {"run": "run-b", "charts/env_steps": 10},
    ]


def test_guide_gridworld_example_has_every_file_it_imports_and_conforms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Section 1's tree lists `env.py`, the guide prints it, and the printed package works."""
    guide = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    assert "src/mtrl_gridworld/env.py" in guide
    blocks = re.findall(r"```python\n(.*?)```", guide, re.S)
    package = tmp_path / "mtrl_gridworld"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "env.py").write_text(next(b for b in blocks if "class GridWorldEnv" in b))
    (package / "plugin.py").write_text(next(b for b in blocks if "def make_gridworld" in b))
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin = importlib.import_module("mtrl_gridworld.plugin")
    plugins = load_plugins(autoload=False, extra={"gridworld": plugin})
    report = check_env(plugins.envs.get("gridworld/GridWorld-v0"), env_kwargs={"size": 4})
    assert "trainable" in report.checks and report.episode_ends > 0


@pytest.mark.parametrize("doc", ["README.md", "docs/plugins.md"])
def test_docs_point_inside_the_repository(doc: str) -> None:
    """Links and paths stay inside the repository: a user's checkout has nothing beside it."""
    assert "../" not in (Path(__file__).parents[2] / doc).read_text()
