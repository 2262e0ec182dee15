#!/bin/bash
# The toy GRPO recipe end to end on a CPU: RL prompts for rotated OCR, the weak toy agentic model evaluated on
# held-out tasks (in the background, beside training), GRPO (grpo.yaml), the trained model evaluated the same way,
# and the reward and tool-use curves. Evaluations are eval/run_vllm.py on the vLLM CPU engine, greedy, with the
# rotate tool; a finished step is kept when the script runs again.
#   bash recipes/grpo_rotated_ocr/toy_cpu/run.sh                     # about 30 minutes on two cores
#   bash recipes/grpo_rotated_ocr/toy_cpu/run.sh --seed 1 --output_dir runs/grpo-toy/run-s1   # flags go to grpo.py
set -euo pipefail
cd "$(dirname "$0")/../../.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-runs/grpo-toy}
EVAL_TASKS=${EVAL_TASKS:-300}
INIT=recipes/pilot_rotated_ocr/toy_cpu/checkpoints/agentic-weak
RUN=${OUT}/run
for (( i = 1; i <= $#; i++ )); do  # an --output_dir among the flags names the run
    if [ "${!i}" = --output_dir ]; then j=$((i + 1)); RUN=${!j}; fi
done
EVAL=(--tasks rotated_ocr:angles=quarter,render=aligned --per_task "${EVAL_TASKS}" --difficulty medium --tools on
      --max_pixels 0 --max_tokens 64 --max_model_len 4096 --dtype float32 --max_images 4 --max_active 64)
started=${SECONDS}

if [ ! -f "${OUT}/data/trl/hf/dataset_dict.json" ]; then
    "${PYTHON}" data_gen/make.py rl --task rotated_ocr --n 4000 --n-test 16 --seed 100000 \
        --option angles=quarter --option render=aligned --out "${OUT}/data"
fi
mkdir -p "${OUT}"
"${PYTHON}" eval/run_vllm.py --model "${INIT}" "${EVAL[@]}" --out "${OUT}/eval-before" > "${OUT}/eval-before.log" 2>&1 &
before=$!
OMP_NUM_THREADS=1 "${PYTHON}" train/grpo.py --config recipes/grpo_rotated_ocr/toy_cpu/grpo.yaml \
    --dataset_name "${OUT}/data" --output_dir "${RUN}" "$@"
wait "${before}" || { echo "the evaluation before training failed: ${OUT}/eval-before.log" >&2; exit 1; }
"${PYTHON}" eval/run_vllm.py --model "${RUN}" "${EVAL[@]}" --out "${RUN}/eval"
"${PYTHON}" train/rl_curves.py "${RUN}" --out "${RUN}/curves.png"
echo "before: ${OUT}/eval-before/report.md; after: ${RUN}/eval/report.md; done after $((SECONDS - started)) s"
