#!/usr/bin/env bash
# The one prepared command of a lent GPU session (docs/benchmarks.md, "Tiny SFT recipe sweep"):
#   1. `bench sft_recipe` on cuda: the tiny SFT recipe sweep (8 variants in parallel on one GPU);
#   2. `bench accelerator --scale 4b`: a random-init Qwen3-4B-architecture policy through the real
#      SFT / rollout / u-GRPO code with LoRA and bf16.
# The GPU image lacks arch and pydantic: their cp312 wheels travel in checkpoints/wheels_device
# (`pip download --python-version 3.12 --only-binary :all: arch pydantic -d checkpoints/wheels_device`).
# At most 8 files come back from $OUT, so the run logs travel as one tarball.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  checkpoints/wheels_device/*.whl
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 WANDB_MODE=disabled PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > /tmp/logs_gpu.txt 2>&1
mkdir -p /tmp/recipe
timeout "${RECIPE_TIMEOUT:-360}" python3 -m benchmarks.sft_recipe --config configs/sft_recipe/gpu.yaml \
  --out "$OUT/sft_recipe" --work /tmp/recipe --device cuda --jobs 8 --threads 2 > /tmp/recipe/driver.log 2>&1
pkill -f "benchmarks.sft_recipe" ; sleep 2
python3 -m benchmarks.sft_recipe --config configs/sft_recipe/gpu.yaml --out "$OUT/sft_recipe" --work /tmp/recipe \
  --report-only >> /tmp/recipe/driver.log 2>&1
timeout "${ACCEL_TIMEOUT:-200}" python3 -m benchmarks.accelerator --out "$OUT/accelerator" --device cuda --scale 4b \
  --steps 2 --work /tmp > /tmp/accelerator.log 2>&1
tar czf "$OUT/logs.tar.gz" -C /tmp logs_gpu.txt accelerator.log recipe/driver.log $(cd /tmp && ls recipe/*.log recipe/*/recipe_eval.json 2>/dev/null)
ls -la "$OUT" "$OUT"/*
