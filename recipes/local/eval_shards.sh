#!/bin/bash
# Shard an evaluation over the GPUs of one machine, without SLURM: one `eval/run_vllm.py --shard i/N` per group of
# GPUS_PER_SHARD GPUs (its own CUDA_VISIBLE_DEVICES, --tensor_parallel_size GPUS_PER_SHARD), all at once; when
# every shard has succeeded, `eval/run_vllm.py merge` joins them and writes the report. Run it from the
# repository root; flags after the config go to eval/run_vllm.py.
#
#   bash recipes/local/eval_shards.sh recipes/eval/qwen2_5_vl_7b/synthetic.yaml           # one shard per GPU
#   GPUS_PER_SHARD=2 bash recipes/local/eval_shards.sh recipes/eval/qwen3_vl_8b/synthetic.yaml --out runs/q3
#   GPUS=4,5,6,7 bash recipes/local/eval_shards.sh recipes/eval/qwen2_5_vl_7b/synthetic.yaml  # these GPUs only
#
# GPUS: the GPUs to use (default: CUDA_VISIBLE_DEVICES, else every GPU nvidia-smi lists); N = their count /
# GPUS_PER_SHARD (GPUs left over stay idle). Shard i logs to LOGS/<run name>.shard-i-of-N.log (LOGS: logs).
# PYTHON: .venv/bin/python. A shard that fails is named with its log, and nothing is merged: run the same command
# again (same GPUS and GPUS_PER_SHARD, so the same N) and every shard resumes where it stopped.
set -euo pipefail

die() {
    echo "eval_shards.sh: $*" >&2
    exit 2
}

CONFIG=${1:?usage: bash recipes/local/eval_shards.sh CONFIG.yaml [eval/run_vllm.py flags]}
shift
PYTHON=${PYTHON:-.venv/bin/python}
GPUS_PER_SHARD=${GPUS_PER_SHARD:-1}
LOGS=${LOGS:-logs}
[ -f eval/run_vllm.py ] || die "run it from the repository root (no eval/run_vllm.py in $(pwd))"
[[ ${GPUS_PER_SHARD} =~ ^[1-9][0-9]*$ ]] || die "GPUS_PER_SHARD must be a positive number, got '${GPUS_PER_SHARD}'"

if [ -z "${GPUS:-}" ]; then
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
        GPUS=${CUDA_VISIBLE_DEVICES}
    elif command -v nvidia-smi >/dev/null; then
        GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | tr -d ' ' | paste -sd, -)
    fi
fi
IFS=, read -r -a gpus <<< "${GPUS:-}"
[ "${#gpus[@]}" -gt 0 ] || die "no GPUs found (CUDA_VISIBLE_DEVICES unset, no nvidia-smi): set GPUS=0,1,..."
SHARDS=$(( ${#gpus[@]} / GPUS_PER_SHARD ))
[ "${SHARDS}" -gt 0 ] || die "${#gpus[@]} GPU(s) (${GPUS}) cannot hold one shard of GPUS_PER_SHARD=${GPUS_PER_SHARD}"
if [ $(( ${#gpus[@]} % GPUS_PER_SHARD )) -ne 0 ]; then
    echo "eval_shards.sh: $(( ${#gpus[@]} % GPUS_PER_SHARD )) of the GPUs ${GPUS} stay idle" \
        "(GPUS_PER_SHARD=${GPUS_PER_SHARD})" >&2
fi

# the run directory, resolved by eval/run_vllm.py itself from the same config and flags
OUT=$("${PYTHON}" eval/run_vllm.py run_dir --config "${CONFIG}" "$@" | tail -n 1)
[ -n "${OUT}" ] || die "eval/run_vllm.py run_dir printed no run directory"
shopt -s nullglob
for file in "${OUT}"/records.shard-*-of-*.jsonl; do
    count=${file##*-of-}
    count=${count%.jsonl}
    if [ "${count}" != "${SHARDS}" ]; then
        die "${OUT} holds the shards of a ${count}-way split ($(basename "${file}"), ...), and ${#gpus[@]} GPU(s)" \
            "at GPUS_PER_SHARD=${GPUS_PER_SHARD} make ${SHARDS}: resume it with GPUS and GPUS_PER_SHARD that make" \
            "${count} shards, or choose another --out"
    fi
done
shopt -u nullglob

mkdir -p "${LOGS}"
pids=()
logs=()
stop() {  # a signal to this script ends every shard (each ends its engines with it)
    trap - INT TERM HUP
    kill -TERM ${pids[@]+"${pids[@]}"} 2>/dev/null || true
    wait || true
    exit "$1"
}
trap 'stop 130' INT
trap 'stop 143' TERM
trap 'stop 129' HUP
for ((i = 0; i < SHARDS; i++)); do
    devices=$(IFS=,; echo "${gpus[*]:i * GPUS_PER_SHARD:GPUS_PER_SHARD}")
    log="${LOGS}/$(basename "${OUT}").shard-${i}-of-${SHARDS}.log"
    echo "shard ${i}/${SHARDS} on GPU(s) ${devices}: ${log}"
    CUDA_VISIBLE_DEVICES=${devices} "${PYTHON}" eval/run_vllm.py --config "${CONFIG}" --shard "${i}/${SHARDS}" \
        --tensor_parallel_size "${GPUS_PER_SHARD}" "$@" >> "${log}" 2>&1 &
    pids+=("$!")
    logs+=("${log}")
done

failed=0
for ((i = 0; i < SHARDS; i++)); do
    status=0
    wait "${pids[i]}" || status=$?
    if [ "${status}" -ne 0 ]; then
        echo "eval_shards.sh: shard ${i}/${SHARDS} failed (exit status ${status}); its log: ${logs[i]}" >&2
        failed=$((failed + 1))
    fi
done
trap - INT TERM HUP
if [ "${failed}" -gt 0 ]; then
    echo "eval_shards.sh: ${failed} of ${SHARDS} shard(s) failed, nothing merged; after fixing the cause, run the" \
        "same command again: every shard resumes where it stopped" >&2
    exit 1
fi

if [ "${SHARDS}" -gt 1 ]; then
    "${PYTHON}" eval/run_vllm.py merge "${OUT}"
fi
