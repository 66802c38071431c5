"""The README, the first page, names what ships: every config in configs/ and every plugin
package in plugins_contrib/ (a config or plugin it leaves out is one a newcomer never finds)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_names_every_shipped_config() -> None:
    missing = [p.name for p in sorted((ROOT / "configs").glob("*.yaml")) if p.name not in README]
    assert not missing, f"README.md does not name configs/{', configs/'.join(missing)}"


def test_the_readme_plugin_table_has_every_contrib_plugin() -> None:
    rows = set(re.findall(r"^\| `([\w-]+)`", README, re.M))
    packages = [p.name.removeprefix("mtrl-") for p in sorted((ROOT / "plugins_contrib").iterdir())]
    missing = [name for name in packages if name not in rows]
    assert not missing, f"README.md's plugin table has no row for {', '.join(missing)}"


def test_the_readme_keeps_the_quickstart_commands() -> None:
    assert "make quickstart" in README and "make test" in README
