#!/usr/bin/env bash
# The one prepared GPU check (docs/scale.md, "The prepared GPU check"): on a fresh clone of a GPU
# machine, with no network, no weights and nothing prepared by hand, run from the repository root:
#   bash benchmarks/gpu_check/gpu_check.sh            # results under $OUT/accelerator, else results/accelerator
# It prints the versions found (and stops if the machine is unfit), builds a random-init Qwen3-4B of the
# real shape on the GPU, runs ~300 SFT steps and 3 u-GRPO steps (8 queries x G = 8 x 512 new tokens)
# under a deadline guard, and writes steps.jsonl + summary.json (benchmarks/gpu_check/command.py). The whole script
# ends within 9 minutes (540 s): the guard's --budget-s (525 s) counts from this script's start
# (GPU_CHECK_T0), and timeout kills the check 535 s after that start at the latest.
# Extra arguments go to the check, e.g. `bash benchmarks/gpu_check/gpu_check.sh --scale 8b`.
set -uo pipefail
GPU_CHECK_T0=$(date +%s.%N)
cd "$(dirname "$0")/../.."
export GPU_CHECK_T0 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 WANDB_MODE=disabled \
  PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
out="${OUT:-results}/accelerator"
mkdir -p "$out"
timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$out/nvidia-smi.txt" || true
# the backstop: what is left of ${GPU_CHECK_LIMIT:-530} s after nvidia-smi, plus 5 s from TERM to KILL
left=$(( ${GPU_CHECK_LIMIT:-530} - ($(date +%s) - ${GPU_CHECK_T0%.*}) ))
[ "$left" -ge 1 ] || left=1  # timeout 0 would mean no limit at all
timeout -k 5 "$left" python3 -m benchmarks.gpu_check.command --out "$out" "$@" 2>&1 | tee "$out/log.txt"
rc=${PIPESTATUS[0]}
echo "gpu_check exit $rc"; ls -la "$out"
exit "$rc"
