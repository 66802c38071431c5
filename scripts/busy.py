"""Run pytest on a busy machine: ``python scripts/busy.py [--hogs N] [PYTEST ARGS...]``.

Starts ``N`` (default 2) processes that spin a CPU core each, runs ``python -m pytest`` with
the arguments given (default: the whole suite) beside them, and always stops them afterwards
(on failure, Ctrl-C or SIGTERM too). Tests that race start-up against a fixed budget fail
here; tests that wait on the condition they check pass. ``make test-busy TESTS=tests/ray``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import signal
import subprocess
import sys
import time


def spin() -> None:
    """Keep one core busy until killed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside pytest")
    args, pytest_args = parser.parse_known_args(argv)
    hogs = [mp.Process(target=spin, daemon=True) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    # SIGTERM ends this process through the finally below, as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    try:
        rc = subprocess.call([sys.executable, "-m", "pytest", *pytest_args])
    finally:
        for h in hogs:
            h.kill()
        for h in hogs:
            h.join(timeout=10)
    took = time.monotonic() - started
    print(f"busy.py: pytest exit {rc} in {took:.0f}s beside {args.hogs} busy processes")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
