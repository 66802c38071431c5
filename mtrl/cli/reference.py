"""``python -m mtrl.cli.reference [--check]``: write docs/config-reference.md from the config
models (:mod:`mtrl.config.reference`) and the built-in learning rules' settings models, which
the config layer cannot import (:func:`mtrl.algorithms.builtin.builtin_algorithms`). Third-party
rules are left out: the page documents mtrl itself, whatever is installed."""

from __future__ import annotations

import sys

from mtrl.algorithms.builtin import builtin_algorithms
from mtrl.config import reference

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Write the page, or with ``--check`` exit 1 when the committed one is out of date."""
    return reference.main(argv, builtin_algorithms().settings_models())


if __name__ == "__main__":
    sys.exit(main())
