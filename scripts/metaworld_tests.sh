#!/usr/bin/env bash
# Meta-World test job: build .venv-metaworld (mtrl as scripts/bootstrap.sh installs it, plus
# plugins_contrib/mtrl-metaworld, whose metaworld 3.1.1 pins mujoco 3.3.0 — the project venv
# keeps the mujoco its measured learning runs used), then run the plugin's tests (one trains
# configs/mt50.yaml end to end for a few thousand env steps) and validate configs/mt10*.yaml and
# configs/mt50.yaml there. Idempotent: bootstrap only reinstalls what changed.
#
#   MTRL_METAWORLD_VENV   venv path (default .venv-metaworld)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MTRL_METAWORLD_VENV:-.venv-metaworld}
MTRL_VENV="$venv" MTRL_EXTRA_CONTRIB=plugins_contrib/mtrl-metaworld bash scripts/bootstrap.sh
"$venv/bin/python" -c "import metaworld, mujoco; print(f'metaworld: mujoco {mujoco.__version__}')"
"$venv/bin/mtrl" validate configs/mt10.yaml
"$venv/bin/mtrl" validate configs/mt10_impala.yaml
"$venv/bin/mtrl" validate configs/mt10_impala_replay.yaml
"$venv/bin/mtrl" validate configs/mt10_sample_efficient.yaml
"$venv/bin/mtrl" validate configs/mt50.yaml
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider plugins_contrib/mtrl-metaworld/tests \
  tests/plugins/test_success_flags.py "$@"
