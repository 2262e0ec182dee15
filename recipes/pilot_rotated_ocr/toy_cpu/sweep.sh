#!/bin/bash
# TIR-Bench's pilot at toy scale on a CPU (README.md beside this file): aligned rotated-OCR data -> direct and
# agentic SFT of a toy Qwen2.5-VL at every data scale and seed, in two arms (equal optimizer steps; equal
# training compute) -> train/pilot.py (every run evaluated through vLLM's CPU engine, the tables with confidence
# intervals, Figure 6) under OUT. Two experiments:
#   FROM=base (the default, the paper's design): fine-tuned from the toy base model that reads upright words
#     (checkpoints/base), a fixed number of epochs at data scales in the paper's proportions 1 : 5 : 10 : 15;
#   FROM=scratch: trained from random weights for a fixed number of steps at every scale.
#
#   bash recipes/pilot_rotated_ocr/toy_cpu/sweep.sh                  # the full sweep: runs/pilot-toy-base
#   QUICK=1 bash recipes/pilot_rotated_ocr/toy_cpu/sweep.sh          # the quick variant: runs/pilot-toy-base-quick
#   FROM=scratch bash recipes/pilot_rotated_ocr/toy_cpu/sweep.sh     # from random weights: runs/pilot-toy
#   SCALES="64 960" SEEDS="0 1" EPOCHS=3 OUT=runs/mine bash recipes/pilot_rotated_ocr/toy_cpu/sweep.sh
#
# Runs train one at a time per core (OMP_NUM_THREADS=1, each pinned to its core). Running it again is safe:
# finished runs and evaluations are kept, an interrupted run starts over. A failed run stops the sweep with
# the name of its log.
set -euo pipefail
cd "$(dirname "$0")/../../.."

HERE=recipes/pilot_rotated_ocr/toy_cpu
FROM=${FROM:-base}
case "${FROM}:${QUICK:-0}" in
    base:0)  # the paper's design: 5 epochs at 1 : 5 : 10 : 15, both arms
        OUT=${OUT:-runs/pilot-toy-base}; SCALES=${SCALES:-64 320 640 960}; SEEDS=${SEEDS:-0 1 2 3 4}
        EPOCHS=${EPOCHS:-5}; COMPUTE_ARM=${COMPUTE_ARM:-1} ;;
    base:1)  # the full sweep's smallest and largest scale, 3 seeds, equal steps only
        OUT=${OUT:-runs/pilot-toy-base-quick}; SCALES=${SCALES:-64 960}; SEEDS=${SEEDS:-0 1 2}
        EPOCHS=${EPOCHS:-5}; COMPUTE_ARM=${COMPUTE_ARM:-0} ;;
    scratch:0)  # 400 steps at every scale
        OUT=${OUT:-runs/pilot-toy}; SCALES=${SCALES:-500 1000 2000}; SEEDS=${SEEDS:-0 1 2}
        STEPS=${STEPS:-400}; COMPUTE_ARM=${COMPUTE_ARM:-1} ;;
    scratch:1)  # the full sweep's smallest scale, equal steps only
        OUT=${OUT:-runs/pilot-toy-quick}; SCALES=${SCALES:-500}; SEEDS=${SEEDS:-0 1 2}
        STEPS=${STEPS:-400}; COMPUTE_ARM=${COMPUTE_ARM:-0} ;;
    *) echo "FROM must be base or scratch and QUICK 0 or 1, got FROM=${FROM} QUICK=${QUICK:-0}" >&2; exit 2 ;;
esac
if [ "${FROM}" = base ]; then
    RECIPE=_from_base  # agentic_from_base.yaml, direct_from_base.yaml
    BASE=${BASE:-${HERE}/checkpoints/base}
    [ -f "${BASE}/model.safetensors" ] || { echo "no base model at ${BASE}: run ${HERE}/train_base.sh" >&2; exit 2; }
    LENGTH="--num_train_epochs ${EPOCHS} --max_steps -1"  # the epochs decide the steps
    BASE_EVAL=(--base "${BASE}")  # its zero-shot accuracy: the figure's starting point
else
    RECIPE=""  # agentic.yaml, direct.yaml
    unset BASE  # each run starts from its recipe's fresh toy model
    LENGTH="--max_steps ${STEPS}"
    BASE_EVAL=()
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

# train NAME MODE SCALE SEED LENGTH...: one run (LENGTH: its steps or epochs, as train/sft.py flags), on the core
# of its xargs slot; a finished run is kept
train() {
    local name=$1 mode=$2 scale=$3 seed=$4 core=$((${SLOT:-0} % $(nproc)))
    shift 4
    if [ -f "${OUT}/runs/${name}/tirlab_sft.json" ]; then
        return 0
    fi
    local began=${SECONDS}
    if ! OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 taskset -c "${core}" "${PYTHON}" train/sft.py \
            --config "${HERE}/${mode}${RECIPE}.yaml" --dataset_name "${OUT}/data" --max_train_samples "${scale}" \
            --seed "${seed}" ${BASE:+--model_name_or_path "${BASE}"} "$@" --output_dir "${OUT}/runs/${name}" \
            > "${OUT}/logs/${name}.log" 2>&1; then
        echo "${name}: training failed, see ${OUT}/logs/${name}.log" >&2
        return 255  # xargs stops starting new runs
    fi
    echo "${name}: $("${PYTHON}" -c 'import json, sys; print(json.load(open(sys.argv[1]))["global_step"])' \
        "${OUT}/runs/${name}/tirlab_sft.json") steps in $((SECONDS - began)) s"
}
export -f train
export OUT HERE PYTHON RECIPE BASE  # BASE: the model every run fine-tunes (unset: the recipe's)

# run_all: one "NAME MODE SCALE SEED LENGTH..." line per run on stdin, JOBS at a time
run_all() {
    xargs -P "${JOBS}" -L 1 --process-slot-var=SLOT bash -c 'train "$@"' train
}

# equal optimizer steps: both modes at every scale and seed (agentic and the largest scales first: they take
# longest)
for mode in agentic direct; do
    for scale in $(tr ' ' '\n' <<< "${SCALES}" | sort -rn); do
        for seed in ${SEEDS}; do
            echo "${mode}-${scale}-s${seed} ${mode} ${scale} ${seed} ${LENGTH}"
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
            echo "direct-${scale}-s${seed}-compute direct ${scale} ${seed} --max_steps ${steps}"
        done
    done | run_all
fi
echo "training: done after $((SECONDS - started)) s"

# one process for vLLM's engine and a forked worker: an evaluation of a toy model starts in about 30 s instead
# of 60 (its engine and worker processes each import vLLM anew otherwise), with the same results
VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_WORKER_MULTIPROC_METHOD=fork \
    "${PYTHON}" train/pilot.py "${OUT}/runs" "${BASE_EVAL[@]}" --per_task "${EVAL_TASKS}" --jobs "${JOBS}" --max_tokens 64 \
        --max_model_len 4096 --dtype float32 --max_images 4 --max_active 64
echo "sweep: done after $((SECONDS - started)) s; tables: ${OUT}/runs/pilot.md, figure: ${OUT}/runs/figure6.png"
