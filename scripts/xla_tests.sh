#!/usr/bin/env bash
# XLA test job: build a separate venv with torch 2.9.x + torch_xla (torch_xla is bound to the torch
# minor it was built for, so it cannot live in .venv beside the newest torch), then run the XLA
# tests and the learner tests there on the XLA CPU device (PJRT_DEVICE=CPU).
#
# Idempotent: a stamp keyed on this script and pyproject.toml makes a rerun skip the install.
# If the venv cannot be built (no network, no wheel for this platform) it prints a SKIPPED line
# with the reason and exits 0; once built, any test failure exits non-zero.
#
#   MTRL_XLA_VENV    venv path                (default .venv-xla)
#   MTRL_XLA_TORCH   torch requirement        (default torch==2.9.1)
#   MTRL_XLA_REQ     torch_xla requirement    (default torch_xla==2.9.0)
#   PYTHON           interpreter for the venv (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MTRL_XLA_VENV:-.venv-xla}
torch_req=${MTRL_XLA_TORCH:-torch==2.9.1}
xla_req=${MTRL_XLA_REQ:-torch_xla==2.9.0}
python=${PYTHON:-python3}
stamp="$venv/.mtrl-xla-stamp"
key="$(cat scripts/xla_tests.sh pyproject.toml | sha256sum | cut -d' ' -f1) $torch_req $xla_req"
log="$venv/.mtrl-xla-install.log"

skip() {
  echo "SKIPPED: XLA tests: $*"
  exit 0
}

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$key" ]; then
  start=$SECONDS
  echo "xla: building $venv with $torch_req $xla_req (several GB on first run)"
  mkdir -p "$venv"
  rm -f "$stamp"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" > "$log" 2>&1 \
    || skip "cannot create $venv: $(tail -n 3 "$log")"
  pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
  # torch and torch_xla in one resolve, with mtrl's runtime and test deps, so nothing moves torch
  # (pyzmq: the async replicas' gossip in tests/parallel; hypothesis: tests/learner's properties).
  if ! "${pip[@]}" "$torch_req" "$xla_req" numpy "gymnasium[classic-control]>=1.0" \
      "pluggy>=1.5" "pydantic>=2.7" "pyyaml>=6.0" "rich>=13" "scipy>=1.10" "pytest>=8" \
      "pytest-timeout>=2" "hypothesis>=6.100" "pyzmq>=26" \
      >> "$log" 2>&1; then
    skip "pip could not install $torch_req $xla_req (see $log): $(grep -v '^WARNING' "$log" | tail -n 3 | tr '\n' ' ')"
  fi
  "${pip[@]}" --no-deps -e . >> "$log" 2>&1 || skip "pip could not install mtrl (see $log)"
  echo "$key" > "$stamp"
  echo "xla: venv ready in $((SECONDS - start)) s"
fi

export PJRT_DEVICE=CPU
"$venv/bin/python" -c "import torch, torch_xla; print(f'xla: torch {torch.__version__}, torch_xla {torch_xla.__version__}')"
# tests/learner, tests/algorithms/impala, tests/sync and tests/parallel prove mtrl's learner on this
# older torch; tests/xla the device.
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/xla tests/learner tests/algorithms/impala tests/sync tests/parallel "$@"
