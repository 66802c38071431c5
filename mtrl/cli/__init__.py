"""The ``mtrl`` command line: wiring only; each subcommand calls the package's public API.

:func:`main` parses the arguments (:mod:`mtrl.cli.parser`) and runs the chosen subcommand:
:mod:`mtrl.cli.info` (plugins, envs, schema), :mod:`mtrl.cli.validate`, :mod:`mtrl.cli.train`
and :mod:`mtrl.cli.evaluate` (eval, report). The tables they print are in
:mod:`mtrl.cli.tables` and :mod:`mtrl.cli.env_table`, imported only when a table is printed.

User mistakes (bad config, unknown id, bad plugin) print one line per problem and exit 2;
never a traceback. Unexpected internal errors keep their traceback (they are bugs).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from mtrl.cli.exit_codes import EXIT_INTERRUPTED, EXIT_USER_ERROR
from mtrl.cli.parser import build_parser
from mtrl.errors import UserError

__all__ = ["EXIT_USER_ERROR", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mtrl ARGV`` (``sys.argv[1:]`` by default) and return its exit status."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as e:
        for line in e.problems:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
