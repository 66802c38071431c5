#!/usr/bin/env bash
# PufferLib test job: the tests of plugins_contrib/mtrl-pufferlib (PufferLib's own C envs as
# batched mtrl envs) in the venv benchmarks/peers/venvs.py builds for them. PufferLib 3.0.0 with
# its Ocean envs installs only from its sdist, and only with the stand-ins venvs.py gives its
# build (its setup.py downloads raylib and box2d from GitHub), so it lives outside .venv.
#
# The first run builds the venv (~3 min, compiles the C envs); later runs reinstall only this
# checkout's mtrl and the plugin (seconds). If the venv cannot be built (no registry, no
# compiler) it prints a SKIPPED line with the reason and exits 0; once built, any test failure
# exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=benchmarks/peers/.venvs/pufferlib_ocean
log=benchmarks/peers/.venvs/pufferlib_ocean-build.log
mkdir -p benchmarks/peers/.venvs
if ! .venv/bin/python benchmarks/peers/venvs.py pufferlib_ocean > "$log" 2>&1; then
  echo "SKIPPED: PufferLib tests: could not build $venv (see $log):" \
    "$(grep -v '^WARNING' "$log" | tail -n 3 | tr '\n' ' ')"
  exit 0
fi
# The venv holds a copy of mtrl from when it was built: this checkout's replaces it.
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
  --force-reinstall . plugins_contrib/mtrl-pufferlib 2>&1 | { grep -v "^WARNING: Location" || true; }
# pytest-timeout: the suite's per-test timeout (pyproject.toml) holds here too.
"$venv/bin/python" -m pip install -q --disable-pip-version-check "pytest-timeout>=2" 2>&1 \
  | { grep -v "^WARNING: Location" || true; }
"$venv/bin/python" -c "import pufferlib, mtrl_pufferlib; print(f'pufferlib: {pufferlib.__version__}')"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider plugins_contrib/mtrl-pufferlib/tests "$@"
