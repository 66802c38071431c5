"""Remove MuJoCo plugin libraries that an earlier mujoco left behind: ``python
scripts/mujoco_leftovers.py`` (prints what it removed; exit 0 when there was nothing to do).

mujoco 4.0.0's wheel does not list ``mujoco/plugin/*.so`` in its install record, so pip cannot
remove them when it replaces 4.0.0 by another version (Meta-World pins 3.3.0). The installed
mujoco then loads every library in that folder at import and fails on the stale one, which
links ``libmujoco.so.4.0.0``. Files in the folder that the installed mujoco's record does not
list are such leftovers; nothing else is touched. Run by ``scripts/bootstrap.sh``.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path


def leftovers() -> list[Path]:
    """Files in the installed mujoco's ``plugin/`` folder that its install record omits."""
    try:
        dist = metadata.distribution("mujoco")
    except metadata.PackageNotFoundError:
        return []
    listed = {Path(str(f)).as_posix() for f in dist.files or []}
    folder = Path(str(dist.locate_file("mujoco/plugin")))
    if not folder.is_dir() or not any(p.startswith("mujoco/plugin/") for p in listed):
        return []  # a record without the plugins (4.0.0 itself): nothing to compare with
    return [p for p in sorted(folder.iterdir()) if f"mujoco/plugin/{p.name}" not in listed]


def main() -> int:
    for path in leftovers():
        path.unlink()
        print(f"removed {path} (left by an earlier mujoco)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
