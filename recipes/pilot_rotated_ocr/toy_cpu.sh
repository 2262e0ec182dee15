#!/bin/bash
# The whole pilot at toy scale on a CPU, in minutes: pilot data -> train/sft.py in both modes at two data scales
# (the 7B recipes, with a tiny random-weight Qwen2.5-VL and CPU settings) -> train/pilot.py (every run evaluated
# through vLLM's CPU engine) -> pilot.md and figure6.png under OUT. It checks the pipeline; the tiny model
# learns the output format at best, so expect accuracies near zero (docs/pilot_toy.md has a run).
#
#   bash recipes/pilot_rotated_ocr/toy_cpu.sh
#   SIZES="32 128" EVAL_SAMPLES=16 OUT=runs/toy bash recipes/pilot_rotated_ocr/toy_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-runs/pilot-toy}
SIZES=${SIZES:-64 256}
EVAL_SAMPLES=${EVAL_SAMPLES:-32}
RECIPES=recipes/pilot_rotated_ocr/qwen2_5_vl_7b
largest=$(tr ' ' '\n' <<< "${SIZES}" | sort -n | tail -n 1)

if [ ! -d "${OUT}/data/agentic" ]; then
    "${PYTHON}" data_gen/make.py pilot --n "${largest}" --n-test 16 --out "${OUT}/data"
fi
"${PYTHON}" -c "import sys; from runtime.tiny_model import build_model; build_model('qwen2_5_vl', sys.argv[1])" \
    "${OUT}/model"
for mode in direct agentic; do
    for size in ${SIZES}; do
        "${PYTHON}" train/sft.py --config "${RECIPES}/${mode}.yaml" --model_name_or_path "${OUT}/model" \
            --dataset_name "${OUT}/data" --max_train_samples "${size}" --output_dir "${OUT}/runs/${mode}-${size}" \
            --use_cpu --dtype float32 --bf16 false --gradient_checkpointing false --dataloader_num_workers 0 \
            --per_device_train_batch_size 8 --gradient_accumulation_steps 1 --learning_rate 3e-3 \
            --warmup_steps 0 --logging_steps 2 --save_strategy no --report_to none
    done
done
"${PYTHON}" train/pilot.py "${OUT}/runs" --per_task "${EVAL_SAMPLES}" --max_tokens 64 --max_model_len 4096 \
    --dtype float32 --max_images 4 --max_active 64
