"""Each panel of ``diagnostics.png`` says what it measures and in which unit, and
docs/REPORT.md explains it (what it shows, healthy against worrying) under that same title."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mtrl.cli import main
from mtrl.tracking.report import FIGURES, Plotter
from mtrl.tracking.report_diagnostics import NAME, PANELS

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "REPORT.md"


def _sections(text: str) -> dict[str, str]:
    """``### title`` headings of ``text`` → the text under each, up to the next heading."""
    parts = re.split(r"^#{2,4} +(.+?) *$", text, flags=re.M)
    return {parts[i].strip("` "): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@pytest.mark.parametrize("panel", PANELS, ids=[p.key.split("/")[-1] for p in PANELS])
def test_each_panel_title_names_its_unit_and_the_doc_explains_it(panel: Any) -> None:
    assert re.search(r"\(.+\)$", panel.title), f"{panel.title!r}: no (unit) at its end"
    sections = _sections(DOC.read_text(encoding="utf-8"))
    assert panel.title in sections, f"docs/REPORT.md has no section titled {panel.title!r}"
    body = sections[panel.title].lower()
    assert "healthy" in body and "worrying" in body, panel.title
    assert panel.key.split("/")[-1] in body, f"{panel.title}: name the metric it draws"


def test_every_figure_of_mtrl_report_is_in_the_doc() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name in [f.name for f in FIGURES] + [NAME]:
        assert f"`{name}`" in text, name


def test_the_readmes_mtrl_report_line_names_the_doc() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    (line,) = [ln for ln in readme if ln.startswith(".venv/bin/mtrl report ")]
    assert "docs/REPORT.md" in line, line


def test_the_drawn_panels_carry_those_titles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    titles: list[str] = []
    finish = Plotter.finish

    def keep(self: Plotter, fig: Any, axes: Any, name: str, *args: Any, **kw: Any) -> None:
        if name == NAME:
            titles.extend(ax.get_title() for ax in axes)
        finish(self, fig, axes, name, *args, **kw)

    monkeypatch.setattr(Plotter, "finish", keep)
    run = tmp_path / "run"
    run.mkdir()
    rows = [
        {"charts/env_steps": 100 * i, **{p.key.format(task="t"): 0.5 + i for p in PANELS}}
        for i in range(4)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["report", str(run), "-o", str(tmp_path / "o")]) == 0
    assert titles == [p.title for p in PANELS]
