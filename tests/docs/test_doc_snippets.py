"""The documentation's code stays true to the code: every whole config in a ```yaml block of
README.md and docs/*.md (one with a top-level ``tasks:``) validates against the installed
plugins, and every ```python block uses only names it imports, defines or says in a comment
where they come from (a reader copies snippets; a missing import is the first thing they hit).
The shipped configs' own test is tests/config/test_config.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mtrl.config import parse_config
from mtrl.names import OWN_VENV_NAMESPACES
from mtrl.plugins import get_plugins

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Env ids that a page defines in its own worked example (docs/plugins.md builds the
#: ``gridworld`` plugin step by step), so no installed plugin offers them.
EXAMPLE_ENV_IDS = {"gridworld/GridWorld-v0"}


def _blocks(lang: str) -> list[tuple[str, str]]:
    """``(page:line, text)`` of every fenced block of ``lang`` in :data:`PAGES`."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(rf"^```{lang}\n(.*?)^```", text, re.S | re.M):
            line = text.count("\n", 0, m.start()) + 1
            found.append((f"{page.relative_to(ROOT)}:{line}", m.group(1)))
    return found


CONFIGS = [(where, text) for where, text in _blocks("ya?ml") if re.search(r"^tasks:", text, re.M)]
SNIPPETS = _blocks("python")


def test_the_docs_have_whole_configs_and_python_snippets_to_check() -> None:
    assert len(CONFIGS) >= 3 and len(SNIPPETS) >= 10


@pytest.mark.parametrize("where,text", CONFIGS, ids=[w for w, _ in CONFIGS])
def test_each_whole_config_in_the_docs_validates(where: str, text: str) -> None:
    ids = re.findall(r"env:\s*([\w.\-]+/[\w.\-]+)", text)
    own = sorted({i.split("/")[0] for i in ids} & set(OWN_VENV_NAMESPACES))
    if own and not all(n in get_plugins().infos for n in own):
        pytest.skip(f"{where} uses {', '.join(own)}, whose plugin lives in its own venv")
    context = get_plugins().config_context()
    context["env_ids"] = set(context["env_ids"]) | EXAMPLE_ENV_IDS
    cfg = parse_config(text, where, **context)
    assert cfg.tasks


def _undefined_names(code: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each name ruff's F821 finds undefined in ``code``."""
    res = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821",
         "--output-format", "concise", "--stdin-filename", "snippet.py", "-"],
        input=code, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return [
        (int(m.group(1)), m.group(2))
        for m in re.finditer(r"snippet\.py:(\d+):\d+: F821 Undefined name `(\w+)`", res.stdout)
    ]


@pytest.mark.parametrize("where,code", SNIPPETS, ids=[w for w, _ in SNIPPETS])
def test_each_python_snippet_imports_what_it_uses(where: str, code: str) -> None:
    comments = " ".join(re.findall(r"#(.*)", code))
    explained = set(re.findall(r"\w+", comments))
    missing = sorted({name for _, name in _undefined_names(code) if name not in explained})
    assert not missing, (
        f"{where}: the snippet uses {', '.join(missing)} without importing or defining them "
        "(or saying in a comment where they come from)"
    )


def test_the_snippet_check_finds_a_missing_import() -> None:
    assert _undefined_names("print(sys.argv)\n") == [(1, "sys")]
