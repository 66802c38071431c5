#!/usr/bin/env bash
# Create the project venv (.venv) and install mtrl, its test tools and the contrib plugins.
# Idempotent: re-running only reinstalls what changed. Used by `make` and by CI.
# Prints one short line per step (a first run downloads torch and friends: minutes).
#
#   MTRL_VENV    venv path            (default .venv; `make VENV=...` passes it)
#   MTRL_TORCH   torch requirement    (default torch==2.13.0, the CPU wheel on our machines;
#                                      GPU users: install their CUDA torch into the venv first,
#                                      an importable torch is kept as it is)
#   PYTHON       interpreter for the venv (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MTRL_VENV:-.venv}
python=${PYTHON:-python3}
torch_req=${MTRL_TORCH:-torch==2.13.0}
t0=$SECONDS

step() { echo "bootstrap [$1/4] ${*:2}"; }
took() { echo "bootstrap       done in $((SECONDS - $1)) s"; }
# pip, quiet; this machine's pip config names index dirs that may not exist, and pip warns
# about each on every lookup: those lines are dropped. pip's own failure fails the step
# (pipefail); a grep that filtered every line does not.
pip_install() {
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | { grep -v -e "^WARNING: Location" || true; } >&2
}

# mtrl is a flat layout (mtrl/ at the top), so setuptools' editable install uses an import
# hook and, since pip 25, shows its notice about it as a "BuildBackendWarning" box. It is
# information only; this filter drops exactly that notice and nothing else.
export PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}ignore:Editable installation:UserWarning"

if [ ! -x "$venv/bin/python" ]; then
  step 1 "creating $venv with $("$python" --version 2>&1)"
  s=$SECONDS
  "$python" -m venv "$venv"
  pip_install --upgrade pip
  took $s
else
  step 1 "$venv exists"
fi

# torch first, so that no dependency resolves it to a multi-GB CUDA build.
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  step 2 "installing $torch_req (first time: a few minutes)"
  s=$SECONDS
  pip_install "$torch_req"
  took $s
else
  step 2 "torch $("$venv/bin/python" -c "import torch; print(torch.__version__)") already installed"
fi

# Every plugins_contrib package but those that need their own venv: mtrl-metaworld pins
# mujoco 3.3.0 (Meta-World's pin), and this venv keeps the mujoco its measured learning runs
# used (gymnasium's MuJoCo tasks in the quickstart); scripts/metaworld_tests.sh builds
# .venv-metaworld for it. mtrl-pufferlib needs PufferLib 3.0.0 with its C envs, whose sdist
# downloads raylib while it builds (no network here): benchmarks/peers/venvs.py
# pufferlib_ocean builds its venv with local stand-ins.
own_venv=(plugins_contrib/mtrl-metaworld plugins_contrib/mtrl-pufferlib)
contrib=()
for p in plugins_contrib/*/pyproject.toml; do
  d=$(dirname "$p")
  [[ " ${own_venv[*]} " == *" $d "* ]] && continue
  [ -e "$p" ] && contrib+=(-e "$d")
done
contrib+=(${MTRL_EXTRA_CONTRIB:+-e "$MTRL_EXTRA_CONTRIB"})
step 3 "installing mtrl[all,external,test,bench,docs] and $((${#contrib[@]} / 2)) plugins_contrib packages" \
  "(first time: minutes)"
s=$SECONDS
pip_install -e ".[all,external,test,bench,docs]" "${contrib[@]}"
# A venv with Meta-World (MTRL_EXTRA_CONTRIB=plugins_contrib/mtrl-metaworld) gets mujoco 3.3.0;
# replacing 4.0.0 leaves plugin libraries pip cannot see, which break `import mujoco` (the
# script's docstring says why).
"$venv/bin/python" scripts/mujoco_leftovers.py
took $s

step 4 "checking the install"
"$venv/bin/python" -c "import mtrl, torch, mujoco; print(f'bootstrap       mtrl {mtrl.__version__}, torch {torch.__version__}, mujoco {mujoco.__version__}')"
echo "bootstrap ok in $((SECONDS - t0)) s: $venv"
