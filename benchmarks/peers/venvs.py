"""Peer venvs (SB3, SB3 with MuJoCo or MinAtar, LeanRL, Sample Factory, PufferLib, the
Meta-World+ authors' metaworld-algorithms) in ``benchmarks/peers/.venvs`` (or the folder named by
``MTRL_PEER_VENVS``, so that several work trees share one set of venvs).

Each venv is built with pip in two steps: torch first (``torch==2.13.0``, the CPU wheel on this
machine's disk, unless the peer pins another), then the peer with torch pinned to the same
version, so pip never swaps torch. A stamp file holding the requirement list makes reruns a
no-op. ``pufferlib_ocean`` is built from source instead (:func:`build_pufferlib_ocean`), and so
is ``metaworld_algorithms``, a JAX peer without torch on its own Python
(:func:`build_metaworld_algorithms`).
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
VENVS = Path(os.environ.get("MTRL_PEER_VENVS") or Path(__file__).resolve().parent / ".venvs")
TORCH = "torch==2.13.0"
#: The commit of rainx0r/metaworld-algorithms the ``metaworld_algorithms`` venv installs.
METAWORLD_ALGORITHMS_COMMIT = "30c9991f5e1e6e119d3f98266add3828390a038e"

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
    # The Meta-World+ authors' multi-task SAC in JAX (rainx0r/metaworld-algorithms, from a local
    # clone at METAWORLD_ALGORITHMS_COMMIT, build_metaworld_algorithms) on JAX's CPU build: the
    # versions of its uv.lock at that commit, except Meta-World, which is ours (3.1.1 from PyPI;
    # the lock takes the authors' fork's master, 3.0.0, from GitHub) on our MuJoCo 3.3.0 (the
    # lock's too). Its code needs Python 3.12 (``type`` statements, ``typing.override``).
    "metaworld_algorithms": [
        "jax[cpu]==0.10.0",
        "jaxlib==0.10.0",
        "flax==0.10.6",
        "distrax==0.1.8",
        "optax==0.2.4",
        "chex==0.1.91",
        "orbax-checkpoint==0.11.40",
        "jaxtyping==0.3.2",
        "tyro==0.9.20",
        "wandb==0.27.0",
        "scipy==1.15.3",
        "numpy==2.2.5",
        "gymnasium==1.1.1",
        "mujoco==3.3.0",
        "metaworld==3.1.1",
        f"metaworld-algorithms @ {METAWORLD_ALGORITHMS_COMMIT} (local clone, --no-deps)",
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
#: Peers that need no torch at all (their venvs are built without it).
NO_TORCH = {"metaworld_algorithms"}
#: Peers whose code needs another Python than the one building the venvs (name -> X.Y).
PYTHON_OF: dict[str, str] = {"metaworld_algorithms": "3.12"}

#: Where :func:`build_metaworld_algorithms` finds a git clone (bare or not) of that repository.
METAWORLD_ALGORITHMS_SRC_ENV = "METAWORLD_ALGORITHMS_SRC"


def python_of(name: str) -> Path:
    """The interpreter of peer venv ``name``."""
    return VENVS / name / "bin" / "python"


def _stamp(name: str) -> str:
    torch = None if name in NO_TORCH else TORCH_OF.get(name, TORCH)
    python = PYTHON_OF.get(name, sys.version.split()[0])
    return json.dumps({"python": python, "torch": torch, "reqs": PEERS[name]})


def base_python(name: str) -> str:
    """The interpreter that creates venv ``name``: this one, or the Python :data:`PYTHON_OF`
    names, found on the PATH or among pyenv's versions (the machine image has pyenv's)."""
    version = PYTHON_OF.get(name)
    if version is None:
        return getattr(sys, "_base_executable", sys.executable)
    candidates = [shutil.which(f"python{version}")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"{version}.*/bin/python{version}"))
    for candidate in candidates:
        if candidate is None:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys, venv; print(sys.executable)"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0:
            return probe.stdout.strip()
    raise RuntimeError(f"peer {name!r} needs Python {version}, and none was found")


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
    subprocess.run([base_python(name), "-m", "venv", str(root)], check=True)
    pip = [str(python_of(name)), "-m", "pip", "install", "-q", "--no-input"]
    torch = TORCH_OF.get(name, TORCH)
    if name not in NO_TORCH:
        subprocess.run([*pip, torch], check=True)
    if name == "pufferlib_ocean":
        build_pufferlib_ocean(pip, torch, log)
    elif name == "metaworld_algorithms":
        build_metaworld_algorithms(pip, log)
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


def build_metaworld_algorithms(pip: list[str], log: Callable[[str], object]) -> None:
    """The Meta-World+ authors' metaworld-algorithms at :data:`METAWORLD_ALGORITHMS_COMMIT`,
    with JAX's CPU build and the pins of :data:`PEERS`, into the venv of ``pip``.

    Its source is the commit taken out of a git clone (bare or not) of
    rainx0r/metaworld-algorithms named by ``METAWORLD_ALGORITHMS_SRC`` (it is on no package
    index; this machine reaches no git host). The package goes in without its own requirements:
    its ``pyproject.toml`` asks for ``metaworld`` (a git fork, through uv's sources) and the
    accelerator extras, which the pins here stand for."""
    src = os.environ.get(METAWORLD_ALGORITHMS_SRC_ENV)
    if not src:
        raise RuntimeError(
            f"set {METAWORLD_ALGORITHMS_SRC_ENV} to a git clone of rainx0r/metaworld-algorithms "
            f"holding commit {METAWORLD_ALGORITHMS_COMMIT}"
        )
    reqs = [r for r in PEERS["metaworld_algorithms"] if "(" not in r]
    subprocess.run([*pip, *reqs], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        paths = ["metaworld_algorithms", "pyproject.toml", "README.md", "LICENSE"]
        archive = subprocess.run(
            ["git", "-C", src, "archive", METAWORLD_ALGORITHMS_COMMIT, *paths],
            capture_output=True,
            check=True,
        )
        log(f"installing metaworld-algorithms {METAWORLD_ALGORITHMS_COMMIT[:7]} from {src}")
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        subprocess.run([*pip, "--no-deps", tmp], check=True)


def build_seconds(name: str) -> float | None:
    """How long the existing venv ``name`` took to build (None if unknown)."""
    path = VENVS / name / ".mtrl-build-seconds"
    return float(path.read_text()) if path.exists() else None


if __name__ == "__main__":
    for peer in sys.argv[1:] or list(PEERS):
        ensure(peer)
