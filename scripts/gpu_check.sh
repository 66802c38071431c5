#!/usr/bin/env bash
# On a machine with a CUDA GPU: the CUDA paths' tests and the test suite (learner.device: auto
# is the GPU there), then the GPU benchmarks alone, each step time-boxed so that the whole
# check ends within BUDGET seconds. Logs, the benchmarks' JSON and the GPU's utilisation
# (sampled every 0.5 s) land in OUT_DIR; a one-line summary per step is printed.
#
#   scripts/gpu_check.sh OUT_DIR [BUDGET_S=540]
#   GPU_CHECK_STEPS="cuda_tests sac_update" scripts/gpu_check.sh OUT_DIR   # only these steps
#
# Needs mtrl with its test, envpool and mujoco extras importable by $PYTHON (default python3); the
# Atari workload needs envpool. docs/BENCHMARKS.md ("GPU") records what it measured.
set -u
out=${1:?usage: scripts/gpu_check.sh OUT_DIR [BUDGET_S]}
budget=${2:-540}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 WANDB_MODE=offline
t0=$(date +%s)
summary=$(mktemp)

left() { echo $((budget - ($(date +%s) - t0))); }

# step NAME SECONDS CMD...: run CMD time-boxed (SIGINT first, so pytest prints its summary).
step() {
    local name=$1 limit=$2 start rc
    shift 2
    if [[ -n ${GPU_CHECK_STEPS:-} && " $GPU_CHECK_STEPS " != *" $name "* ]]; then
        return
    fi
    ((limit > $(left) - 15)) && limit=$(($(left) - 15))
    if ((limit < 10)); then
        echo "$name: skipped, no time left" | tee -a "$summary"
        return
    fi
    start=$(date +%s)
    timeout -s INT -k 15 "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    echo "$name: rc=$rc in $(($(date +%s) - start)) s (limit $limit s)" | tee -a "$summary"
    tail -n 4 "$out/$name.log"
}

{
    nvidia-smi
    "$py" -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'cuda', \
torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0))"
    nproc
} >"$out/machine.txt" 2>&1
head -n 12 "$out/machine.txt"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -lms 500 \
    >"$out/gpu_util.csv" 2>&1 &
smi=$!

# Correctness first, the CUDA paths and the suite side by side (xdist, one file per worker).
step cuda_tests 180 "$py" -m pytest -q -p no:cacheprovider -n 4 tests/gpu --durations=10 &
cuda_tests=$!
step suite 180 "$py" -m pytest -q -p no:cacheprovider -n 12 --dist loadfile --timeout 200 \
    tests plugins_contrib/mtrl-minatar plugins_contrib/mtrl-scisim plugins_contrib/mtrl-heat \
    plugins_contrib/mtrl-minigrid \
    --ignore tests/gpu --ignore tests/ray --ignore tests/xla
wait $cuda_tests
# A time-boxed pytest can leave its xdist workers running: they would load the benchmarks.
pkill -9 -f -- "-m pytest" 2>/dev/null

# Then the benchmarks, alone: the learner (Adam fused against unfused, then a profile), SAC's
# gradient step and the share its replay draw takes, the tasks' networks stacked or not (ten
# tasks of two shapes), where a replay should live, the Sebulba
# Atari pipeline in fewer, larger pools, and Anakin (last: its figure is on record already).
step learner_fused 45 "$py" benchmarks/learner_update.py configs/atari_envpool.yaml \
    --device cuda --updates 20 --fused --out-dir "$out"
step learner_profile 30 "$py" benchmarks/learner_update.py configs/atari_envpool.yaml \
    --device cuda --updates 20 --profile 5 --out-dir "$out"
step sac_update 60 "$py" benchmarks/learner_update.py configs/sac_pendulum_cartpole.yaml \
    --device cuda --updates 20 --out-dir "$out"
step sac_profile 45 "$py" benchmarks/learner_update.py configs/sac_pendulum_cartpole.yaml \
    --device cuda --updates 10 --profile 3 --out-dir "$out"
step sac_stacked 120 "$py" benchmarks/learner_update.py configs/sac_pendulum_cartpole.yaml \
    --device cuda --updates 1 --task-copies 5 --stacked --out-dir "$out"
step impala_stacked 60 "$py" benchmarks/learner_update.py configs/quickstart.yaml \
    --device cuda --updates 10 --task-copies 5 --stacked --out-dir "$out"
step replay_device 45 "$py" benchmarks/replay_device.py --device cuda --seconds 2 --out-dir "$out"
step throughput 110 "$py" benchmarks/throughput.py --seconds 3 --repeat 1 \
    --workloads atari-2x128 atari-1x256 --modes process-central
step anakin 90 "$py" benchmarks/anakin_vs_sebulba.py --device cuda --anakin-envs 131072 \
    --sebulba-envs 1024 --seconds 2 --rounds 2 --skip-env --compile-mode reduce-overhead

kill "$smi" 2>/dev/null
cp docs/results/throughput.json docs/results/anakin_vs_sebulba.json "$out"/ 2>/dev/null
(cd "$out" && tar czf results.tgz ./*.json ./*.log ./*.txt ./*.csv 2>/dev/null)
echo "== summary (budget $budget s, used $(($(date +%s) - t0)) s)"
cat "$summary"
