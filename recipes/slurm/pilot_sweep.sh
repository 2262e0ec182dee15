#!/bin/bash
# TIR-Bench's pilot on SLURM: the pilot data (unless it exists), direct and agentic SFT at every data scale
# (8 runs of recipes/slurm/sft.sbatch), then train/pilot.py once all succeeded: every run evaluated on
# held-out rotated OCR (agentic with the rotate tool, direct without; the base model zero-shot, BASE: the
# recipes' model_name_or_path) and the paper's Figure 6.
#
#   bash recipes/slurm/pilot_sweep.sh                            # Qwen2.5-VL-7B, 1k/5k/10k/15k
#   SIZES="1000 5000" NODES=2 bash recipes/slurm/pilot_sweep.sh
#   DRY_RUN=1 bash recipes/slurm/pilot_sweep.sh                  # print the sbatch commands, submit nothing
#
# Submitting it again is safe: every run resumes from its last checkpoint, finished ones only save again,
# and the summary reuses finished evaluations.
set -euo pipefail
cd "$(dirname "$0")/../.."

RECIPES=${RECIPES:-recipes/pilot_rotated_ocr/qwen2_5_vl_7b}
SIZES=${SIZES:-1000 5000 10000 15000}
NODES=${NODES:-1}
DATA=${DATA:-data/pilot}
OUT=${OUT:-runs/pilot_rotated_ocr/$(basename "${RECIPES}")}
PYTHON=${PYTHON:-.venv/bin/python}
EVAL_SAMPLES=${EVAL_SAMPLES:-500}
# the model the runs fine-tune: its zero-shot accuracy is the figure's starting point
# (BASE= leaves it out)
BASE=${BASE-$(sed -n 's/^model_name_or_path: *//p' "${RECIPES}/agentic.yaml")}

submit() {  # submit NAME [sbatch arguments]: prints the job id (in a dry run, the name)
    local name=$1
    shift
    if [ -n "${DRY_RUN:-}" ]; then
        printf '%q ' sbatch --job-name="${name}" "$@" >&2
        printf '\n' >&2
        echo "${name}"
    else
        sbatch --parsable --job-name="${name}" "$@"
    fi
}

if [ -z "${DRY_RUN:-}" ]; then mkdir -p logs; fi  # every job's log goes there, and Slurm does not create it
after=()
if [ ! -d "${DATA}/agentic" ] || [ ! -d "${DATA}/direct" ]; then
    after+=("$(submit tirlab-pilot-data --ntasks=1 --cpus-per-task=32 --time=2:00:00 \
        --output=logs/%x-%j.out --wrap="${PYTHON} data_gen/make.py pilot --out ${DATA}")")
fi
dependency=()
if [ "${#after[@]}" -gt 0 ]; then dependency=(--dependency="afterok:${after[0]}"); fi

runs=()
for mode in direct agentic; do
    for size in ${SIZES}; do
        runs+=("$(submit "tirlab-pilot-${mode}-${size}" "${dependency[@]}" --nodes="${NODES}" \
            recipes/slurm/sft.sbatch "${RECIPES}/${mode}.yaml" --dataset_name "${DATA}" \
            --max_train_samples "${size}" --output_dir "${OUT}/${mode}-${size}")")
    done
done

summary=$(submit tirlab-pilot-summary --dependency="afterok:$(IFS=:; echo "${runs[*]}")" \
    --ntasks=1 --gpus-per-task=1 --cpus-per-task=16 --time=12:00:00 --output=logs/%x-%j.out \
    --wrap="${PYTHON} train/pilot.py ${OUT} --per_task ${EVAL_SAMPLES}${BASE:+ --base ${BASE}}")
echo "submitted ${#runs[@]} SFT runs into ${OUT}; the summary (job ${summary}) writes ${OUT}/pilot.md"
