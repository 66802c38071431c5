"""``mtrl envs --long``'s table: each env's spaces with what its plugin registered about it.

Output formatting only, like :mod:`mtrl.cli.tables` (whose ``print_envs`` prints the short
table): rows come from :func:`mtrl.plugins.describe.describe_env`; rich is imported only here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table

from mtrl.cli.tables import console


def _score(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def print_env_details(rows: Sequence[dict[str, Any]]) -> None:
    """One row per env: id, spaces, random → reference score, stochastic, time limit, and the
    plugin's description with any notes (library warnings met while finding spaces) in yellow."""
    table = Table(title=f"mtrl envs ({len(rows)})")
    for col in ("id", "observation", "action", "random → reference", "stochastic", "max steps"):
        table.add_column(col, overflow="fold")
    table.add_column("description", overflow="fold", ratio=1)
    for r in rows:
        notes = "".join(f"\n[yellow]{escape(n)}[/]" for n in r.get("notes", []))
        stochastic = r.get("stochastic")
        table.add_row(
            r["id"],
            r.get("observation", f"[red]{escape(r.get('error', ''))}[/]"),
            r.get("action", ""),
            f"{_score(r.get('random_score'))} → {_score(r.get('reference_score'))}",
            "?" if stochastic is None else ("yes" if stochastic else "no"),
            str(r.get("max_episode_steps") or "-"),
            escape(r.get("description") or "") + notes,
        )
    console().print(table)
