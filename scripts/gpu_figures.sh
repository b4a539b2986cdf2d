#!/usr/bin/env bash
# The GPU figures of docs/results.md ("On a GPU"), from the repository root on a CUDA machine:
#   (a) the bf16 check (benchmarks/bf16.py), (b) bench.py rollout at 16/64/128 copies
#   and (c) bench.py train in bf16 and fp32, on the random-weight model of Qwen2.5-0.5B's
#   configuration, then (d) a short main job (train_reflection.py: 3 training minutes, bf16;
#   fp32 if bf16 fails), each with a time limit, a failing step not stopping the next.
# Expects the packages a CUDA image lacks (trl, datasets, math-verify, gymnasium, pettingzoo,
# transformers 5.23 and their missing needs) as wheels under .whl/ (`pip download --no-deps
# --only-binary=:all: ... -d .whl NAME==VERSION`); they are installed to /tmp/site, not over the
# image's. Writes at most 20 files to $OUT (default outputs/gpu_figures): env.txt, steps.txt, and
# each step's log and JSON (the main job's metrics.json as main_metrics.json; its model and
# checkpoints stay in $MAIN_DIR). BUDGET_S (default 580) is the whole script's time: the main
# job's training minutes shrink if the benchmarks left it less than it needs.
set -x
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
# The image's torch (2.11) is below the pinned range (>=2.13): a warning only. This also turns a
# trl/transformers version mismatch into a warning; env.txt shows the versions that ran.
export MATHTEAMS_ALLOW_UNSUPPORTED=1
# The scripts import the project's packages, not pip-installed here: the repository root.
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-outputs/gpu_figures}
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-580}
MAIN_DIR=${MAIN_DIR:-/tmp/main_gpu}
mkdir -p "$OUT"

if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

{
    date -u
    nvidia-smi
    "$PY" - <<'EOF'
import platform
from importlib.metadata import PackageNotFoundError, version

import torch

print("python", platform.python_version())
for name in ("torch", "transformers", "trl", "datasets", "accelerate", "peft", "tokenizers",
             "huggingface_hub", "math-verify", "gymnasium", "pettingzoo", "pyarrow", "fsspec"):
    try:
        print(name, version(name))
    except PackageNotFoundError:
        print(name, "MISSING")
print("cuda", torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name())
print("bf16 supported", torch.cuda.is_bf16_supported())
EOF
} 2>&1 | tee "$OUT/env.txt"

step() {  # step NAME LIMIT_S COMMAND...: run with a time limit, log to $OUT/NAME.log
    local name=$1 limit=$2 began=$SECONDS
    shift 2
    timeout "$limit" "$@" 2>&1 | tee -a "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "$name rc=$rc seconds=$((SECONDS - began)) limit=$limit: $*" | tee -a "$OUT/steps.txt"
    return "$rc"
}

# (a) The bf16 check (trainers.precision): non-finite gradients of left-padded rows under bf16
# autocast, cuDNN attention on vs the project's guard, at widths 64 mod 128 and not.
step bf16 "${BF16_S:-60}" "$PY" -m benchmarks.bf16 --qwen-0.5b \
    --widths 192 256 320 448 704 768 | tee "$OUT/bf16.json"
# (b) Rollouts at 16, 64 and 128 copies.
for copies in 16 64 128; do
    step "rollout$copies" "${ROLLOUT_S:-60}" "$PY" scripts/bench.py rollout --device cuda \
        --qwen-0.5b --problems "$copies" --repeats 1 --json "$OUT/rollout$copies.json"
done
# (c) One GRPO step against plain TRL, bf16 mixed precision and float32.
for precision in bf16 fp32; do
    step "train_$precision" "${TRAIN_S:-100}" "$PY" scripts/bench.py train --device cuda \
        --qwen-0.5b --precision "$precision" --repeats 2 --json "$OUT/train_$precision.json"
done

# The main job: 3 training minutes, or what the budget leaves after ~2 min of evaluations.
left=$((BUDGET_S - SECONDS))
minutes=$("$PY" -c "print(max(0.5, min(3.0, ($left - 130) / 60)))")
main() {  # main PRECISION_FLAGS...
    local limit=$((BUDGET_S - SECONDS))
    rm -rf "$MAIN_DIR"
    step main $((limit > 60 ? limit : 60)) "$PY" scripts/train_reflection.py grpo --use_cpu false "$@" \
        --max_train_minutes "$minutes" --output_dir "$MAIN_DIR"
}
main --bf16 true
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ $((BUDGET_S - SECONDS)) -gt 200 ]; then
    echo "bf16 main job failed (rc=$rc): fp32" | tee -a "$OUT/steps.txt"
    minutes=$("$PY" -c "print(max(0.5, min(3.0, ($((BUDGET_S - SECONDS)) - 130) / 60)))")
    main --bf16 false
fi
cp "$MAIN_DIR/metrics.json" "$OUT/main_metrics.json"
cat "$OUT/steps.txt"
