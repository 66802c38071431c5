"""Build a C simulation against the C client, with no manual install step.

The C client (``mtrl/coupling/c/``) needs ``zmq.h`` and libzmq. pyzmq's wheels bundle libzmq
(``pyzmq.libs/libzmq-*.so.*``) but not its header, so this package ships libzmq 4.3.5's public
header verbatim (``c/vendor/zmq.h``, MPL-2.0, licence beside it; docs/COUPLING.md says why) and
links the bundled library by its path, with an rpath, so a fresh ``pip install pyzmq`` is all
a machine needs besides ``gcc`` (or ``mpicc`` from the ``mpich`` wheel for MPI codes). A system
libzmq is used instead when ``MTRL_LIBZMQ`` names it.

Builds are cached by a hash of the sources, flags and compiler (``$MTRL_CACHE`` or
``~/.cache/mtrl/sims``) and written atomically, so many actor processes may ask at once.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

C_DIR = Path(__file__).resolve().parent / "c"
CLIENT_SOURCES = (C_DIR / "mtrl_coupling.c",)
INCLUDE_DIRS = (C_DIR, C_DIR / "vendor")


class BuildError(RuntimeError):
    """The C compiler is missing or failed; the message holds its output."""


def libzmq_path() -> Path:
    """The libzmq shared library to link: ``$MTRL_LIBZMQ``, else the one pyzmq bundles."""
    env = os.environ.get("MTRL_LIBZMQ")
    if env:
        return Path(env)
    try:
        import zmq
    except ImportError as e:
        raise BuildError("pyzmq is not installed: pip install 'mtrl[external]'") from e
    site = Path(zmq.__file__).resolve().parent.parent
    found = sorted(glob.glob(str(site / "pyzmq.libs" / "libzmq*.so*")))
    found += sorted(glob.glob(str(Path(zmq.__file__).resolve().parent / "libzmq*.so*")))
    if not found:
        raise BuildError(
            f"no libzmq found beside pyzmq ({site}); set MTRL_LIBZMQ to a libzmq.so "
            "(e.g. from the libzmq3-dev package)"
        )
    return Path(found[0])


def find_compiler(mpi: bool = False) -> str:
    """``mpicc`` (beside this interpreter first: the ``mpich`` wheel's) or ``gcc``/``cc``."""
    if mpi:
        local = Path(sys.prefix) / "bin" / "mpicc"
        if local.exists():
            return str(local)
        found = shutil.which("mpicc")
        if found:
            return found
        raise BuildError("mpicc not found: pip install mpich (or your MPI's compiler wrapper)")
    for name in (os.environ.get("CC"), "gcc", "cc"):
        if name and shutil.which(name):
            return shutil.which(name) or name
    raise BuildError("no C compiler found (gcc or cc): install gcc")


def cache_dir() -> Path:
    root = os.environ.get("MTRL_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "mtrl"
    return base / "sims"


def build(
    sources: Sequence[str | Path],
    name: str,
    *,
    mpi: bool = False,
    cflags: Sequence[str] = ("-O2",),
    libs: Sequence[str] = ("-lm",),
    output_dir: str | Path | None = None,
) -> Path:
    """Compile ``sources`` with the C client into the executable ``name``; returns its path.

    Nothing is compiled when an executable from the same inputs is cached already.
    """
    cc = find_compiler(mpi)
    lib = libzmq_path()
    inputs = [Path(s).resolve() for s in sources] + list(CLIENT_SOURCES)
    h = hashlib.sha256()
    for p in [*inputs, C_DIR / "mtrl_coupling.h"]:
        h.update(p.read_bytes())
    h.update(repr((cc, str(lib), list(cflags), list(libs))).encode())
    out_dir = Path(output_dir) if output_dir else cache_dir() / h.hexdigest()[:16]
    exe = out_dir / name
    if exe.exists():
        return exe
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=out_dir)
    os.close(fd)
    cmd = [
        cc,
        *cflags,
        *(f"-I{d}" for d in INCLUDE_DIRS),
        *map(str, inputs),
        "-o",
        tmp,
        str(lib),
        f"-Wl,-rpath,{lib.parent}",
        *libs,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        raise BuildError(f"building {name} failed:\n$ {' '.join(cmd)}\n{proc.stderr[-4000:]}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, exe)
    return exe
