#!/bin/bash
# TIR-Bench's pilot at toy scale on a CPU (README.md beside this file): aligned rotated-OCR data -> a toy
# Qwen2.5-VL trained from scratch, direct and agentic, at every data scale and seed, in two arms (equal
# optimizer steps; equal training compute) -> train/pilot.py (every run evaluated through vLLM's CPU engine,
# the tables with confidence intervals, Figure 6) under OUT.
#
#   bash recipes/pilot_rotated_ocr/toy_cpu/sweep.sh              # the full sweep: runs/pilot-toy
#   QUICK=1 bash recipes/pilot_rotated_ocr/toy_cpu/sweep.sh      # the quick variant: runs/pilot-toy-quick
#   SCALES="500 2000" SEEDS="0 1" STEPS=300 OUT=runs/mine bash recipes/pilot_rotated_ocr/toy_cpu/sweep.sh
#
# Runs train one at a time per core (OMP_NUM_THREADS=1, each pinned to its core). Running it again is safe:
# finished runs and evaluations are kept, an interrupted run starts over. A failed run stops the sweep with
# the name of its log.
set -euo pipefail
cd "$(dirname "$0")/../../.."

HERE=recipes/pilot_rotated_ocr/toy_cpu
if [ "${QUICK:-0}" = 1 ]; then  # the full sweep's smallest scale, equal steps only: the agentic-over-direct gap
    OUT=${OUT:-runs/pilot-toy-quick}
    SCALES=${SCALES:-500}
    SEEDS=${SEEDS:-0 1 2}
    STEPS=${STEPS:-400}
    COMPUTE_ARM=${COMPUTE_ARM:-0}
else
    OUT=${OUT:-runs/pilot-toy}
    SCALES=${SCALES:-500 1000 2000}
    SEEDS=${SEEDS:-0 1 2}
    STEPS=${STEPS:-400}
    COMPUTE_ARM=${COMPUTE_ARM:-1}
fi
PYTHON=${PYTHON:-.venv/bin/python}
JOBS=${JOBS:-$(nproc)}
EVAL_TASKS=${EVAL_TASKS:-300}
largest=$(tr ' ' '\n' <<< "${SCALES}" | sort -n | tail -n 1)
mkdir -p "${OUT}/logs"
started=${SECONDS}

generated() {  # the training samples of the data under OUT (0: none yet)
    "${PYTHON}" -c 'import json, sys; print(min(json.load(open(f"{sys.argv[1]}/{form}/generation.json"))["n"]
                                                for form in ("agentic", "direct")))' "${OUT}/data" 2>/dev/null || echo 0
}
if [ "$(generated)" -lt "${largest}" ]; then
    rm -rf "${OUT}/data"
    "${PYTHON}" data_gen/make.py pilot --render aligned --n "${largest}" --n-test 16 --out "${OUT}/data" \
        --workers "${JOBS}" > "${OUT}/logs/data.log" 2>&1 || { echo "data: failed, see ${OUT}/logs/data.log" >&2; exit 1; }
fi
echo "data: ${OUT}/data (${largest} training samples) after $((SECONDS - started)) s"

# train NAME MODE SCALE SEED STEPS: one run, on the core of its xargs slot; a finished run is kept
train() {
    local name=$1 mode=$2 scale=$3 seed=$4 steps=$5 core=$((${SLOT:-0} % $(nproc)))
    if [ -f "${OUT}/runs/${name}/tirlab_sft.json" ]; then
        return 0
    fi
    local began=${SECONDS}
    if ! OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 taskset -c "${core}" "${PYTHON}" train/sft.py \
            --config "${HERE}/${mode}.yaml" --dataset_name "${OUT}/data" --max_train_samples "${scale}" \
            --seed "${seed}" --max_steps "${steps}" --output_dir "${OUT}/runs/${name}" \
            > "${OUT}/logs/${name}.log" 2>&1; then
        echo "${name}: training failed, see ${OUT}/logs/${name}.log" >&2
        return 255  # xargs stops starting new runs
    fi
    echo "${name}: ${steps} steps in $((SECONDS - began)) s"
}
export -f train
export OUT HERE PYTHON

# run_all: one "NAME MODE SCALE SEED STEPS" line per run on stdin, JOBS at a time
run_all() {
    xargs -P "${JOBS}" -L 1 --process-slot-var=SLOT bash -c 'train "$@"' train
}

# equal optimizer steps: both modes at every scale and seed (agentic first: its runs take longest)
for mode in agentic direct; do
    for scale in ${SCALES}; do
        for seed in ${SEEDS}; do
            echo "${mode}-${scale}-s${seed} ${mode} ${scale} ${seed} ${STEPS}"
        done
    done
done | run_all

# equal training compute: a direct run for as many steps as it takes to process the training tokens of the
# agentic run at the same scale and seed (at the tokens per step its equal-steps run processed)
if [ "${COMPUTE_ARM}" = 1 ]; then
    for scale in ${SCALES}; do
        for seed in ${SEEDS}; do
            steps=$("${PYTHON}" -c 'import sys; from train.pilot import matched_steps; print(matched_steps(*sys.argv[1:]))' \
                "${OUT}/runs/agentic-${scale}-s${seed}" "${OUT}/runs/direct-${scale}-s${seed}")
            echo "direct-${scale}-s${seed}-compute direct ${scale} ${seed} ${steps}"
        done
    done | run_all
fi
echo "training: done after $((SECONDS - started)) s"

"${PYTHON}" train/pilot.py "${OUT}/runs" --per_task "${EVAL_TASKS}" --jobs "${JOBS}" --max_tokens 64 \
    --max_model_len 4096 --dtype float32 --max_images 4 --max_active 64
echo "sweep: done after $((SECONDS - started)) s; tables: ${OUT}/runs/pilot.md, figure: ${OUT}/runs/figure6.png"
