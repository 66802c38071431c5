"""mkdocs hooks of the documentation site (mkdocs.yml): the README is the site's first page.

The README lives at the repository root, where GitHub shows it, and links to ``docs/X.md``;
the site is built from ``docs/``. Here the README becomes the generated page ``index.md``
with those links made relative to ``docs/``, and the CHANGELOG becomes ``changelog.md``, so
each text is written once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]


def _relink(text: str) -> str:
    """Links from the repository root into ``docs/`` made relative to ``docs/``."""
    return re.sub(r"\]\(docs/", "](", text).replace("](CHANGELOG.md)", "](changelog.md)")


def on_files(files: Files, config: Any) -> Files:
    """Add ``index.md`` (the README) and ``changelog.md`` (CHANGELOG.md) to the site."""
    for name, source in (("index.md", "README.md"), ("changelog.md", "CHANGELOG.md")):
        text = _relink((ROOT / source).read_text(encoding="utf-8"))
        files.append(File.generated(config, name, content=text))
    return files
