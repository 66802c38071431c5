"""The hand-written BatchEnv in docs/plugins.md passes the conformance suite as printed."""

from __future__ import annotations

import re
import types
from pathlib import Path

from mtrl.plugins import hookimpl, load_plugins
from mtrl.testing import check_env


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
