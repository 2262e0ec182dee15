#!/bin/bash
# The toy checkpoints tirlab ships (checkpoints/ beside this file), which `make run` evaluates on a machine
# without a GPU: one agentic and one direct toy Qwen2.5-VL, seed 0, 2,000 aligned rotated-OCR samples,
# 1,000 steps of the recipes beside this file, both trainings at once (one core each). About 15 minutes on
# two cores. It writes under OUT, then replaces checkpoints/ with the two models and their SHA256SUMS.
#
#   bash recipes/pilot_rotated_ocr/toy_cpu/train_shipped.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."

HERE=recipes/pilot_rotated_ocr/toy_cpu
OUT=${OUT:-runs/toy-shipped}
PYTHON=${PYTHON:-.venv/bin/python}
STEPS=1000
# the model, its processor, the training record and its loss curve (checkpoints/README.md describes them)
SHIPPED=(config.json generation_config.json model.safetensors chat_template.jinja processor_config.json
         tokenizer.json tokenizer_config.json tirlab_sft.json trainer_state.json)

"${PYTHON}" data_gen/make.py pilot --render aligned --n 2000 --n-test 16 --out "${OUT}/data" --workers 2
pids=()
for mode in agentic direct; do
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 taskset -c "$(( ${#pids[@]} % $(nproc) ))" "${PYTHON}" train/sft.py \
        --config "${HERE}/${mode}.yaml" --dataset_name "${OUT}/data" --max_train_samples 2000 --seed 0 \
        --max_steps "${STEPS}" --output_dir "${OUT}/${mode}" > "${OUT}/${mode}.log" 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do
    wait "${pid}" || { echo "training failed: see ${OUT}/agentic.log and ${OUT}/direct.log" >&2; exit 1; }
done

for mode in agentic direct; do
    target="${HERE}/checkpoints/${mode}"
    rm -rf "${target}" && mkdir -p "${target}"
    for name in "${SHIPPED[@]}"; do
        cp "${OUT}/${mode}/${name}" "${target}/"
    done
    (cd "${target}" && sha256sum "${SHIPPED[@]}" > SHA256SUMS)
    echo "${target}: $(du -sh "${target}" | cut -f1)"
done
