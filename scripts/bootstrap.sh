#!/usr/bin/env bash
# Create the project venv (.venv) and install mtrl, its test tools and the contrib plugins.
# Idempotent: re-running only reinstalls what changed. Used by `make` and by CI.
#
#   MTRL_VENV    venv path            (default .venv)
#   MTRL_TORCH   torch requirement    (default torch==2.13.0, the CPU wheel on our machines;
#                                      GPU users: install their CUDA torch into the venv first,
#                                      an importable torch is kept as it is)
#   PYTHON       interpreter for the venv (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MTRL_VENV:-.venv}
python=${PYTHON:-python3}

if [ ! -x "$venv/bin/python" ]; then
  echo "bootstrap: creating $venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
fi
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)

# torch first, so that no dependency resolves it to a multi-GB CUDA build.
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "bootstrap: installing ${MTRL_TORCH:-torch==2.13.0}"
  "${pip[@]}" "${MTRL_TORCH:-torch==2.13.0}"
fi

echo "bootstrap: installing mtrl[all,test,bench] and plugins_contrib/*"
contrib=()
for p in plugins_contrib/*/pyproject.toml; do
  [ -e "$p" ] && contrib+=(-e "$(dirname "$p")")
done
"${pip[@]}" -e ".[all,test,bench]" "${contrib[@]}" 2>&1 | grep -v -e "^WARNING: Location" >&2 || true
"$venv/bin/python" -c "import mtrl, torch; print(f'bootstrap: mtrl {mtrl.__version__}, torch {torch.__version__}')"
