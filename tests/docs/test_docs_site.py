"""The documentation site (mkdocs.yml) builds in strict mode, as ``make docs`` builds it: a
broken link, a missing anchor or a docstring the API pages cannot read fails here, in CI,
not on a reader. The build takes a few seconds (the API pages cover the public modules)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[2]

NOT_INSTALLED = "the docs extra is not installed (scripts/bootstrap.sh installs mtrl[docs])"
for package in ("mkdocs", "material", "mkdocstrings"):
    pytest.importorskip(package, reason=NOT_INSTALLED)


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True, text=True, env=env, timeout=240, check=False,
    )  # fmt: skip


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    res = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert res.returncode == 0, res.stderr[-4000:]
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "make quickstart" in index  # the README is the first page
    api = (tmp_path / "site" / "api" / "plugins" / "index.html").read_text(encoding="utf-8")
    assert "mtrl_register_envs" in api  # the hooks' docstrings are rendered
    assert (tmp_path / "site" / "config-reference" / "index.html").exists()


@pytest.mark.parametrize(
    "link", ["[gone](missing.md)", "[gone](other.md#no-such-heading)"], ids=["page", "anchor"]
)
def test_the_site_settings_make_a_broken_link_fail_the_build(tmp_path: Path, link: str) -> None:
    """A site with mkdocs.yml's strictness and link checks, whose one page has a broken link."""
    ours = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# Home\n\nSee {link}.\n", encoding="utf-8")
    (docs / "other.md").write_text("# Other\n\n## A heading\n", encoding="utf-8")
    config = {
        "site_name": "t",
        "docs_dir": str(docs),
        "strict": ours["strict"],
        "validation": ours["validation"],
        "markdown_extensions": ["toc"],
    }
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    res = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert res.returncode != 0 and "index.md" in res.stderr, res.stderr
