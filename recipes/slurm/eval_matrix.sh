#!/bin/bash
# The whole evaluation matrix (eval/benchmarks/README.md) on a SLURM cluster: every benchmark recipe under
# recipes/eval/<model>/ as its own array of SHARDS shards through eval.sbatch, then one job, after every array,
# that merges each cell (the only merge: eval.sbatch's own is off, NO_MERGE=1) and writes the matrix table to
# runs/matrix.md. Run from the repository root; extra flags go to every cell's eval/run_vllm.py.
#
#   bash recipes/slurm/eval_matrix.sh                                   # every cell, 4 shards each
#   SHARDS=8 MODELS="qwen3_vl_8b deepeyes_7b" bash recipes/slurm/eval_matrix.sh
#   CELLS="vtc_bench_interface agentic_mme_atm" bash recipes/slurm/eval_matrix.sh --limit 50   # a quick pass
#
# A failed shard resumes when its array index is submitted again (NO_MERGE=1 and eval.sbatch's header); then run
# the last step again by hand: python eval/run_vllm.py merge RUN_DIR, and python -m eval.matrix RUN_DIR ... >
# runs/matrix.md.
set -euo pipefail

die() {
    echo "eval_matrix.sh: $*" >&2
    exit 2
}

SHARDS=${SHARDS:-4}
[[ ${SHARDS} =~ ^[1-9][0-9]*$ ]] || die "SHARDS must be a positive number, got '${SHARDS}'"
PYTHON=${PYTHON:-.venv/bin/python}
MODELS=${MODELS:-}
CELLS=${CELLS:-}
RECIPES=${RECIPES:-recipes/eval}
mkdir -p logs runs

recipes=()
for recipe in "${RECIPES}"/*/*.yaml; do
    model=$(basename "$(dirname "${recipe}")")
    cell=$(basename "${recipe}" .yaml)
    [ "${cell}" != synthetic ] || continue
    if [ -n "${MODELS}" ] && [[ " ${MODELS} " != *" ${model} "* ]]; then continue; fi
    if [ -n "${CELLS}" ] && [[ " ${CELLS} " != *" ${cell} "* ]]; then continue; fi
    recipes+=("${recipe}")
done
[ "${#recipes[@]}" -gt 0 ] || die "no recipe matches MODELS='${MODELS}' CELLS='${CELLS}' (see ${RECIPES}/)"

jobs=()
outs=()
for recipe in "${recipes[@]}"; do
    out=$("${PYTHON}" eval/run_vllm.py run_dir --config "${recipe}" "$@" | tail -n 1)
    [ -n "${out}" ] || die "eval/run_vllm.py run_dir printed no run directory for ${recipe}"
    job=$(NO_MERGE=1 SHARDS=${SHARDS} sbatch --parsable --array="0-$((SHARDS - 1))" recipes/slurm/eval.sbatch "${recipe}" "$@")
    outs+=("${out}")
    jobs+=("${job%%;*}")
    echo "${recipe}: job ${job%%;*}, ${SHARDS} shards, run directory ${out}"
done

# after every array, whatever its outcome: merge what finished (a merge refuses while a shard is missing) and
# write the table; a cell that did not finish is a row that says so
final=$(printf '%q ' "${outs[@]}")
sbatch --dependency="afterany:$(IFS=:; echo "${jobs[*]}")" --job-name=tirlab-eval-matrix --ntasks=1 \
    --cpus-per-task=4 --gpus-per-task=0 --output="logs/%x-%j.out" \
    --wrap="for out in ${final% }; do [ -f \"\$out/records.jsonl\" ] || ${PYTHON} eval/run_vllm.py merge \"\$out\" || true; done; ${PYTHON} -m eval.matrix ${final% } > runs/matrix.md"
