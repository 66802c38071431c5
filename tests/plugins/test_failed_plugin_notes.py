"""A third-party plugin that fails to import is named, with the reason, wherever an env id it
may have offered is missing: config validation, ``mtrl train`` and ``mtrl envs --plugin``.

The plugin is "installed" as a real distribution: a ``*.dist-info`` with an ``mtrl`` entry point
whose module does not exist, in a directory put on the path (nothing is installed globally).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mtrl.config import parse_config
from mtrl.errors import ConfigError
from mtrl.plugins import load_plugins

REASON = "ModuleNotFoundError: No module named 'mtrl_foo_missing'"


def _install_broken(site: Path) -> Path:
    """A dist ``mtrl-foo`` whose entry point ``foo`` names a module that is not there."""
    info = site / "mtrl_foo-0.3.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mtrl-foo\nVersion: 0.3.0\n")
    (info / "entry_points.txt").write_text("[mtrl]\nfoo = mtrl_foo_missing.plugin\n")
    return site


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("MTRL_PLUGINS", "MTRL_DISABLE_PLUGINS", "MTRL_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(var, raising=False)
    site = _install_broken(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    return site


def _mtrl(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MTRL_")}
    env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-m", "mtrl.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_unknown_id_of_a_failed_plugin_says_it_failed_to_load(site: Path) -> None:
    plugins = load_plugins()
    assert plugins.infos["foo"].status == "error"
    note = plugins.unknown_env_note("foo/Bar-v0")
    assert note == f"note: plugin 'foo' (package mtrl-foo) failed to load: {REASON}"
    # A typo in a loaded plugin's namespace is a typo: no note about the broken plugin.
    assert plugins.unknown_env_note("gymnasium/CartPol-v1") is None
    # Another namespace nobody loaded: the broken plugin may be the one, so it is named.
    assert "plugin 'foo'" in (plugins.unknown_env_note("zoo/Bar-v0") or "")

    with pytest.raises(ConfigError) as err:
        parse_config(
            "tasks:\n  - env: foo/Bar-v0\n",
            "c.yaml",
            env_ids=plugins.envs.ids(),
            env_note=plugins.unknown_env_note,
        )
    assert err.value.problems == [
        f"c.yaml:2: tasks[0].env: unknown env id 'foo/Bar-v0'; `mtrl envs` lists the ids of "
        f"installed plugins; note: plugin 'foo' (package mtrl-foo) failed to load: {REASON}"
    ]


def test_cli_names_the_failed_plugin_in_one_line_and_exits_2(site: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        textwrap.dedent(f"""
        tasks:
          - env: foo/Bar-v0
        actors: {{mode: serial}}
        tracking: {{run_dir: {tmp_path / "runs"}, wandb: {{mode: disabled}}}}
        """)
    )
    for args in (("validate", str(cfg)), ("train", str(cfg))):
        res = _mtrl(site, *args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
        assert "unknown env id 'foo/Bar-v0'" in lines[0]
        assert f"plugin 'foo' (package mtrl-foo) failed to load: {REASON}" in lines[0]

    res = _mtrl(site, "envs", "--plugin", "foo")
    assert res.returncode == 2, res.stdout
    assert res.stdout == ""
    assert res.stderr.strip() == (
        f"error: --plugin: plugin 'foo' (package mtrl-foo) failed to load: {REASON}"
    )
    ok = _mtrl(site, "envs", "--plugin", "gymnasium", "--ids-only")
    assert ok.returncode == 0 and "gymnasium/CartPole-v1" in ok.stdout.splitlines()
