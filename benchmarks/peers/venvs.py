"""Peer venvs (SB3, SB3 with MuJoCo or MinAtar, LeanRL, Sample Factory, PufferLib) in
``benchmarks/peers/.venvs``.

Each venv is built with pip in two steps: torch first (``torch==2.13.0``, the CPU wheel on this
machine's disk, unless the peer pins another), then the peer with torch pinned to the same
version, so pip never swaps torch. A stamp file holding the requirement list makes reruns a
no-op. ``pufferlib_ocean`` is built from source instead (:func:`build_pufferlib_ocean`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENVS = Path(__file__).resolve().parent / ".venvs"
TORCH = "torch==2.13.0"

#: name -> pip requirements (installed after torch, with torch pinned beside them).
PEERS: dict[str, list[str]] = {
    "sb3": ["stable-baselines3==2.9.*"],
    # SAC on MuJoCo tasks: the same gymnasium and MuJoCo as mtrl's .venv.
    "sb3_mujoco": ["stable-baselines3==2.9.*", "gymnasium[mujoco]==1.4.0", "mujoco==4.0.0"],
    # SB3's SAC on an mtrl env (scisim/heat1d): mtrl and the plugin installed beside SB3, the
    # env stepped one copy at a time through mtrl.plugins.SingleCopyEnv.
    "sb3_mtrl": [
        "stable-baselines3==2.9.*",
        str(ROOT),
        str(ROOT / "plugins_contrib" / "mtrl-scisim"),
    ],
    # SB3's PPO on MinAtar: mtrl and its MinAtar plugin beside SB3, so that SB3 steps the very
    # game mtrl's PPO does (minatar/<game> through mtrl.plugins.SingleCopyEnv).
    "sb3_minatar": [
        "stable-baselines3==2.9.*",
        str(ROOT),
        str(ROOT / "plugins_contrib" / "mtrl-minatar"),
    ],
    # LeanRL's compiled SAC script (pytorch-labs/LeanRL, vendored in benchmarks/peers/leanrl):
    # tensordict and torchrl of its time for its vmapped critics and replay (tensordict 0.14's
    # TensorDictModule refuses the script's policy, which returns three tensors for one out
    # key; 0.6 takes it), tyro for its arguments, and the gymnasium and MuJoCo it was written
    # for (0.29's vector API: infos["final_info"]).
    "leanrl": [
        "tensordict==0.6.*",
        "torchrl==0.6.*",
        "tyro",
        "tqdm",
        "wandb",
        "gymnasium[mujoco]==0.29.1",
        "mujoco==2.3.7",
        "numpy<2",
    ],
    # Sample Factory 2.1.1 pins numpy<2 and gymnasium<1.0 itself; pip resolves the rest.
    "sf": ["sample-factory==2.1.1"],
    # PufferLib 3's trainer (pufferl) and vectorisation; its compiled ops (pufferlib._C) are
    # built against torch 2.9.0 exactly, whose PyPI wheel is a CUDA build (run on the CPU here).
    "pufferlib": ["pufferlib-core==3.0.23"],
    # The whole PufferLib 3.0.0 with its Ocean C envs, built from PyPI's sdist against the CPU
    # torch (build_pufferlib_ocean): the trainer and PufferLib's own fast envs; mtrl and
    # plugins_contrib/mtrl-pufferlib beside them.
    "pufferlib_ocean": [
        "pufferlib==3.0.0 (sdist)",
        "numpy<2",
        "cython",
        "setuptools",
        "wheel",
        "mtrl",
        "mtrl-pufferlib",
    ],
}

PUFFERLIB_SDIST = ("pufferlib", "3.0.0")
#: mtrl's own requirements (pyproject.toml), for venvs that install mtrl without its deps.
MTRL_REQUIREMENTS = [
    "gymnasium[classic-control]>=1.0",
    "pluggy>=1.5",
    "pydantic>=2.7",
    "pyyaml>=6.0",
    "rich>=13",
    "scipy>=1.10",
]

#: Peers whose wheels pin a torch other than :data:`TORCH`.
TORCH_OF: dict[str, str] = {"pufferlib": "torch==2.9.0"}


def python_of(name: str) -> Path:
    """The interpreter of peer venv ``name``."""
    return VENVS / name / "bin" / "python"


def _stamp(name: str) -> str:
    torch = TORCH_OF.get(name, TORCH)
    return json.dumps({"python": sys.version.split()[0], "torch": torch, "reqs": PEERS[name]})


def ensure(name: str, log: Callable[[str], object] = print) -> float:
    """Build venv ``name`` unless its stamp matches; return the seconds spent building."""
    root = VENVS / name
    stamp = root / ".mtrl-stamp"
    if stamp.exists() and stamp.read_text() == _stamp(name) and python_of(name).exists():
        return 0.0
    t0 = time.perf_counter()
    log(f"building peer venv {name!r} in {root} (once; a few minutes) ...")
    if root.exists():
        shutil.rmtree(root)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(root)], check=True)
    pip = [str(python_of(name)), "-m", "pip", "install", "-q", "--no-input"]
    torch = TORCH_OF.get(name, TORCH)
    subprocess.run([*pip, torch], check=True)
    if name == "pufferlib_ocean":
        build_pufferlib_ocean(pip, torch, log)
    else:
        subprocess.run([*pip, *PEERS[name], torch], check=True)
    subprocess.run([str(python_of(name)), "-m", "pip", "check"], check=False)
    seconds = time.perf_counter() - t0
    (root / ".mtrl-build-seconds").write_text(f"{seconds:.1f}\n")
    stamp.write_text(_stamp(name))
    log(f"peer venv {name!r} built in {seconds:.0f} s")
    return seconds


def sdist_url(project: str, version: str) -> str:
    """The URL of ``project``'s source archive of ``version`` on PyPI (its simple index)."""
    with urllib.request.urlopen(f"https://pypi.org/simple/{project}/", timeout=60) as r:
        index = r.read().decode()
    found = re.search(rf'href="([^"#]+/{project}-{re.escape(version)}\.tar\.gz)[#"]', index)
    if found is None:
        raise RuntimeError(f"no sdist of {project} {version} on PyPI")
    return found.group(1)


def build_pufferlib_ocean(pip: list[str], torch: str, log: Callable[[str], object]) -> None:
    """PufferLib 3.0.0 from its PyPI sdist, Ocean C envs included, into the venv of ``pip``.

    Its ``setup.py`` downloads raylib for the web and box2d from GitHub, which this machine
    cannot reach: the sdist already holds the Linux raylib the envs link, so empty folders
    stand in for the two downloads, and ``impulse_wars`` (the one env needing box2d) is left
    out. An ``nvcc`` on the PATH would make its ops a CUDA extension against the CPU torch, so
    the build runs with a PATH without it."""
    subprocess.run([*pip, "numpy<2", "cython", "setuptools", "wheel", torch], check=True)
    url = sdist_url(*PUFFERLIB_SDIST)
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "pufferlib.tar.gz"
        log(f"downloading {url}")
        urllib.request.urlretrieve(url, archive)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        src = Path(tmp) / f"pufferlib-{PUFFERLIB_SDIST[1]}"
        for stub in ("raylib-5.5_webassembly", "box2d-web", "box2d-linux-amd64"):
            (src / stub).mkdir(exist_ok=True)
        shutil.rmtree(src / "pufferlib" / "ocean" / "impulse_wars")
        nvcc = shutil.which("nvcc")
        path = os.environ.get("PATH", "").split(os.pathsep)
        if nvcc is not None:
            path = [p for p in path if Path(p).resolve() != Path(nvcc).parent.resolve()]
        env = {**os.environ, "PATH": os.pathsep.join(path)}
        subprocess.run([*pip, "--no-build-isolation", str(src), torch], check=True, env=env)
    # mtrl and its PufferLib plugin beside it. PufferLib 3.0.0 declares gymnasium<=0.29.1, which
    # mtrl (gymnasium>=1.0) cannot run on; its Ocean envs use gymnasium's spaces only and run
    # on 1.x. pip would otherwise rebuild PufferLib looking for a version without the pin, so
    # mtrl's requirements go in first and mtrl and the plugin without theirs.
    subprocess.run([*pip, *MTRL_REQUIREMENTS, "pytest", torch], check=True)
    plugin = ROOT / "plugins_contrib" / "mtrl-pufferlib"
    subprocess.run([*pip, "--no-deps", str(ROOT), str(plugin)], check=True)


def build_seconds(name: str) -> float | None:
    """How long the existing venv ``name`` took to build (None if unknown)."""
    path = VENVS / name / ".mtrl-build-seconds"
    return float(path.read_text()) if path.exists() else None


if __name__ == "__main__":
    for peer in sys.argv[1:] or list(PEERS):
        ensure(peer)
