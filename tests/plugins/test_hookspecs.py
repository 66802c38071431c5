"""Every hookspec is documented: its docstring is the public contract."""

from __future__ import annotations

import inspect

from mtrl.plugins import hookspecs


def test_every_hookspec_has_a_real_docstring() -> None:
    specs = [
        f
        for name, f in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("mtrl_")
    ]
    assert specs, "no hookspecs found"
    for f in specs:
        assert hasattr(f, "mtrl_spec"), f"{f.__name__} is not marked with @hookspec"
        doc = inspect.getdoc(f) or ""
        assert len(doc.split()) >= 20, f"{f.__name__} needs a docstring that states its contract"


def test_hookspecs_are_documented_for_plugin_authors() -> None:
    from pathlib import Path

    guide = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    for name, _ in inspect.getmembers(hookspecs, inspect.isfunction):
        if name.startswith("mtrl_"):
            assert name in guide, f"docs/plugins.md does not document hook {name}"
