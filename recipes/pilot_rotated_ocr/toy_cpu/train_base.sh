#!/bin/bash
# The toy pilot's base model (checkpoints/base beside this file): a toy Qwen2.5-VL that reads upright words,
# pretrained here on upright aligned renders (no rotation, no tools) by base.yaml, like a pretrained MLLM; the
# paper-design sweep (sweep.sh) fine-tunes it. Then its accuracy on held-out upright and rotated words
# (eval/run_vllm.py, greedy, no tools) goes to checkpoints/base/reads.json, and the model, its processor, its
# training record and loss curve to checkpoints/base with their SHA256SUMS. About 15 minutes on two cores.
#
#   bash recipes/pilot_rotated_ocr/toy_cpu/train_base.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."

HERE=recipes/pilot_rotated_ocr/toy_cpu
OUT=${OUT:-runs/toy-base}
PYTHON=${PYTHON:-.venv/bin/python}
EVAL_TASKS=${EVAL_TASKS:-300}
SAMPLES=4000
SHIPPED=(config.json generation_config.json model.safetensors chat_template.jinja processor_config.json
         tokenizer.json tokenizer_config.json tirlab_sft.json trainer_state.json reads.json)
mkdir -p "${OUT}"

"${PYTHON}" data_gen/make.py sft --task rotated_ocr --forms direct --option angles=none --option render=aligned \
    --n "${SAMPLES}" --n-test 16 --out "${OUT}/data" --workers "$(nproc)" > "${OUT}/data.log" 2>&1 \
    || { echo "data: failed, see ${OUT}/data.log" >&2; exit 1; }
OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "${PYTHON}" train/sft.py --config "${HERE}/base.yaml" \
    --dataset_name "${OUT}/data" --max_train_samples "${SAMPLES}" --output_dir "${OUT}/model" > "${OUT}/train.log" 2>&1 \
    || { echo "training failed: see ${OUT}/train.log" >&2; exit 1; }

# held-out words (seeds neither data split used), upright and turned by quarter turns as in the pilot
pids=()
for angles in none quarter; do
    "${PYTHON}" eval/run_vllm.py --model "${OUT}/model" --tasks "rotated_ocr:angles=${angles},render=aligned" \
        --tools none --per_task "${EVAL_TASKS}" --max_pixels 0 --dtype float32 --max_tokens 64 --max_model_len 4096 \
        --out "${OUT}/eval-${angles}" > "${OUT}/eval-${angles}.log" 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do
    wait "${pid}" || { echo "evaluation failed: see ${OUT}/eval-none.log and ${OUT}/eval-quarter.log" >&2; exit 1; }
done
"${PYTHON}" - "${OUT}" <<'PY'
import json, sys
from pathlib import Path
from train.pilot import wilson_interval
out = Path(sys.argv[1])
reads = {}
for name, angles in (("upright", "none"), ("rotated", "quarter")):
    overall = json.loads((out / f"eval-{angles}" / "summary.json").read_text())["modes"]["no_tools"]["overall"]
    correct = round(overall["accuracy"] * overall["n"])
    reads[name] = {"tasks": f"rotated_ocr:angles={angles},render=aligned", "n": overall["n"], "correct": correct,
                   "accuracy": overall["accuracy"], "wilson_95": list(wilson_interval(correct, overall["n"]))}
(out / "model" / "reads.json").write_text(json.dumps(reads, indent=2) + "\n")
print({name: f"{100 * r['accuracy']:.1f}% of {r['n']}" for name, r in reads.items()})
PY

target="${HERE}/checkpoints/base"
staged="${OUT}/shipped"  # the shipped folder is replaced only once the new one is complete
rm -rf "${staged}" && mkdir -p "${staged}"
for name in "${SHIPPED[@]}"; do
    cp "${OUT}/model/${name}" "${staged}/"
done
(cd "${staged}" && sha256sum "${SHIPPED[@]}" > SHA256SUMS)
rm -rf "${target}" && mv "${staged}" "${target}"
echo "${target}: $(du -sh "${target}" | cut -f1)"
