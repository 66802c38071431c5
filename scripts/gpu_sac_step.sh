#!/usr/bin/env bash
# SAC's gradient step on a CUDA GPU, each part time-boxed: the CUDA tests of the SAC paths, then
# on MT10's shapes (ten tasks of Box(39) / Box(4), Meta-World not needed) the stacked step
# replayed as a CUDA graph against it run eagerly, and its batches drawn on the device against
# drawn on the host (GPU_SAC_PER_TASK=1: also the stacked step against the per-task step); then
# SAC with its defaults (Pendulum + Acrobot) and configs/sac_pendulum_cartpole.yaml, the
# stacked step against the per-task step (GPU_SAC_SHAPES=0 skips these two); then
# configs/sac_pendulum_cartpole.yaml learned over three seeds on the GPU, side by side
# (GPU_SAC_LEARN=0 skips it). Each benchmark prints ms per gradient step and the step's anatomy
# (kernel launches, kernels, the device's busy share, the arithmetic floor). Logs and JSON land
# in OUT_DIR.
#
#   scripts/gpu_sac_step.sh OUT_DIR
#
# Needs mtrl's dependencies importable by $PYTHON (default python3) and mtrl on PYTHONPATH.
# docs/BENCHMARKS.md ("SAC's step on the GPU") records what it measured.
set -u
out=${1:?usage: scripts/gpu_sac_step.sh OUT_DIR}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 WANDB_MODE=offline

run() {  # run NAME SECONDS CMD...
    local name=$1 limit=$2 start
    shift 2
    start=$(date +%s)
    timeout -s INT -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
    echo "== $name: rc=$? in $(($(date +%s) - start)) s"
    grep -E "passed|failed|error|ms per|anatomy|x as fast|/ |Error" "$out/$name.log" | tail -n 14
}

"$py" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))"
run tests 150 "$py" -m pytest -q -p no:cacheprovider tests/gpu -k "sac or stacked or recorded or drawn"
mt10=(configs/mt10.yaml --box-spaces 39:4 --device cuda --out-dir "$out")
run mt10_graphed 120 "$py" benchmarks/learner_update.py "${mt10[@]}" --updates 3 --graphed
run mt10_device_draw 120 "$py" benchmarks/learner_update.py "${mt10[@]}" --updates 3 --device-draw
[[ ${GPU_SAC_PER_TASK:-0} == 1 ]] &&
    run mt10_stacked 150 "$py" benchmarks/learner_update.py "${mt10[@]}" --updates 2 --stacked-step
[[ ${GPU_SAC_SHAPES:-1} == 1 ]] && {
run defaults 120 "$py" benchmarks/learner_update.py benchmarks/configs/sac_defaults.yaml \
    --device cuda --updates 1 --stacked-step --out-dir "$out"
run pendulum_cartpole 90 "$py" benchmarks/learner_update.py configs/sac_pendulum_cartpole.yaml \
    --device cuda --updates 2 --stacked-step --out-dir "$out"
}
[[ ${GPU_SAC_LEARN:-1} == 1 ]] &&
    run learning 300 "$py" benchmarks/learning.py configs/sac_pendulum_cartpole.yaml \
        --seed-list 0,1,2 --jobs 3 --eval-episodes 10 --set learner.device=cuda \
        --name sac_pendulum_cartpole_cuda --out-dir "$out" --work-dir "$out/learning"
