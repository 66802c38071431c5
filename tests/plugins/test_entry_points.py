"""Third-party plugins installed with pip appear through entry points, exactly as users see it.

Each test pip-installs real throwaway plugin packages into a private directory and runs the real
``mtrl`` command with that directory on PYTHONPATH ("installed") or without it ("uninstalled").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

GOOD_PLUGIN = """
import gymnasium as gym
from mtrl.plugins import batch_env_from_gymnasium, hookimpl


def _make(num_envs, seed, **kwargs):
    return batch_env_from_gymnasium(lambda: gym.make("CartPole-v1", **kwargs), num_envs, seed)


@hookimpl
def mtrl_register_envs(register):
    register.env("Balance-v0", _make, description="CartPole under another name")
"""

TRACKER_PLUGIN = """
import json
import os

from mtrl.plugins import hookimpl


class _Log:
    def __init__(self, path):
        self._f = open(path, "a", encoding="utf-8")

    def write(self, record):
        self._f.write(json.dumps(record) + "\\n")
        self._f.flush()

    def close(self):
        self._f.close()


def _make(cfg, run_dir, task_names):
    return _Log(os.environ["FILELOG_PATH"])  # a KeyError when unset: reported, left out


@hookimpl
def mtrl_register_trackers(register):
    register.tracker("filelog", _make, description="records to $FILELOG_PATH")
"""

BROKEN_PLUGIN = """
raise ImportError("libfoosim.so: cannot open shared object file")
"""


def _package(root: Path, dist: str, module: str, ep_name: str, code: str) -> Path:
    pkg = root / dist
    (pkg / module).mkdir(parents=True)
    (pkg / module / "__init__.py").write_text(textwrap.dedent(code))
    (pkg / "pyproject.toml").write_text(
        textwrap.dedent(f'''
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{dist}"
        version = "1.2.3"

        [project.entry-points.mtrl]
        {ep_name} = "{module}"
    ''')
    )
    return pkg


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plugins")
    target = root / "site"
    pkgs = [
        _package(root, "mtrl-toy", "mtrl_toy", "toy", GOOD_PLUGIN),
        _package(root, "mtrl-broken", "mtrl_broken", "broken", BROKEN_PLUGIN),
        _package(root, "mtrl-filelog", "mtrl_filelog", "filelog", TRACKER_PLUGIN),
    ]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(target),
            *map(str, pkgs),
        ],
        check=True,
        capture_output=True,
    )
    return target


def _mtrl(*args: str, site: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MTRL_")}
    environ.pop("PYTHONPATH", None)
    if site is not None:
        environ["PYTHONPATH"] = str(site)
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "mtrl.cli", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


def _infos(out: str) -> dict[str, dict]:
    return {i["name"]: i for i in json.loads(out)}


def test_installed_plugin_appears_and_broken_one_is_reported(site: Path) -> None:
    res = _mtrl("plugins", "--json", site=site)
    assert res.returncode == 0, res.stderr
    infos = _infos(res.stdout)
    toy = infos["toy"]
    assert (toy["status"], toy["package"], toy["version"]) == ("ok", "mtrl-toy", "1.2.3")
    assert toy["envs"] == ["toy/Balance-v0"]
    assert toy["hooks"] == ["mtrl_register_envs"]
    broken = infos["broken"]
    assert broken["status"] == "error"
    assert "import failed: ImportError: libfoosim.so" in broken["errors"][0]
    assert infos["gymnasium"]["status"] == "ok"

    envs = _mtrl("envs", "--plugin", "toy", "--json", site=site)
    assert envs.returncode == 0, envs.stderr
    rows = json.loads(envs.stdout)
    assert rows == [
        {
            "id": "toy/Balance-v0",
            "plugin": "toy",
            "observation": "float32[4]",
            "action": "Discrete(2)",
        }
    ]


def test_uninstalled_plugin_disappears(site: Path) -> None:
    infos = _infos(_mtrl("plugins", "--json").stdout)
    assert "toy" not in infos and "broken" not in infos


def test_env_vars_control_autoload(site: Path) -> None:
    infos = _infos(_mtrl("plugins", "--json", site=site, MTRL_DISABLE_PLUGIN_AUTOLOAD="1").stdout)
    assert "toy" not in infos and infos["gymnasium"]["status"] == "ok"
    infos = _infos(_mtrl("plugins", "--json", site=site, MTRL_PLUGINS="toy").stdout)
    assert "toy" in infos and "broken" not in infos
    infos = _infos(_mtrl("plugins", "--json", site=site, MTRL_DISABLE_PLUGINS="toy").stdout)
    assert infos["toy"]["status"] == "disabled"


def test_installed_plugin_env_passes_conformance_in_spawned_workers(site: Path) -> None:
    code = (
        "from mtrl.testing import check_env; r = check_env('toy/Balance-v0'); "
        "print(','.join(r.checks))"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MTRL_")}
    environ["PYTHONPATH"] = str(site)
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert "spawn" in res.stdout.strip().split(",")  # the worker rebuilt the registry itself


TRACKER_RUN = """
import logging, sys
from mtrl.config import load_config
from mtrl.plugins import get_plugins
from mtrl.tracking import make_sinks, tracker_factories

logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
plugins = get_plugins()
cfg = load_config(sys.argv[1], env_ids=plugins.envs.ids(),
                  tracker_names=plugins.trackers.names())
sinks = make_sinks(cfg, None, ["t"], tracker_factories(cfg, plugins), console="quiet")
sinks.write({"charts/env_steps": 7})
sinks.close()
"""


def test_installed_tracker_is_listed_validated_and_runs(site: Path, tmp_path: Path) -> None:
    infos = _infos(_mtrl("plugins", "--json", site=site).stdout)
    filelog = infos["filelog"]
    assert (filelog["status"], filelog["hooks"], filelog["trackers"]) == (
        "ok",
        ["mtrl_register_trackers"],
        ["filelog"],
    )
    assert infos["toy"]["trackers"] == []

    base = "tasks:\n  - env: gymnasium/CartPole-v1\ntracking:\n  wandb: {mode: disabled}\n"
    typo, good = tmp_path / "typo.yaml", tmp_path / "good.yaml"
    typo.write_text(base + "  trackers: [filelgo]\n")
    good.write_text(base + "  trackers: [filelog]\n")
    res = _mtrl("validate", str(typo), site=site)
    assert res.returncode == 2
    assert "tracking.trackers[0]: unknown tracker 'filelgo'; did you mean 'filelog'?" in res.stderr
    assert _mtrl("validate", str(good), site=site).returncode == 0

    environ = {k: v for k, v in os.environ.items() if not k.startswith("MTRL_")}
    environ["PYTHONPATH"] = str(site)
    environ["MTRL_DISABLE_PLUGINS"] = "envpool,pettingzoo,tensor,chaos"
    run = [sys.executable, "-c", TRACKER_RUN, str(good)]
    log = tmp_path / "metrics.jsonl"
    res = subprocess.run(
        run, capture_output=True, text=True, env={**environ, "FILELOG_PATH": str(log)}, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert [json.loads(line) for line in log.read_text().splitlines()] == [{"charts/env_steps": 7}]
    res = subprocess.run(run, capture_output=True, text=True, env=environ, timeout=120)
    assert res.returncode == 0, res.stderr  # the run goes on without the tracker
    assert "tracker 'filelog' (plugin 'filelog') failed to start" in res.stderr
    assert "KeyError: 'FILELOG_PATH'" in res.stderr
