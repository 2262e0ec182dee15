#!/bin/bash
# The body of the training sbatch files: one `accelerate launch SCRIPT --config RECIPE [flags]` per node, the
# first node the rendezvous, each launcher with the CPUs of its task (--cpus-per-task of the job).
#   bash recipes/slurm/launch.sh train/grpo.py RECIPE.yaml [flags]      (inside an allocation, repository root)
#
# ACCELERATE_CONFIG: the accelerate config (recipes/accelerate/). Unset, DeepSpeed ZeRO-3 (zero3.yaml), or FSDP2
# (fsdp.yaml) where DeepSpeed cannot be imported, which it says on stderr; a DeepSpeed config named here without
# DeepSpeed installed stops before anything starts. ACCELERATE: the accelerate program (.venv/bin/accelerate);
# PYTHON: the Python it runs (default: the python beside it), which must import deepspeed for ZeRO.
# GPUS_PER_NODE (8), MASTER_PORT (29500).
set -euo pipefail

die() {
    echo "launch.sh: $*" >&2
    exit 2
}

SCRIPT=${1:?usage: launch.sh train/SCRIPT.py RECIPE.yaml [flags]}
CONFIG=${2:?usage: launch.sh train/SCRIPT.py RECIPE.yaml [flags]}
shift 2
: "${SLURM_NNODES:?launch.sh runs inside a SLURM allocation (sbatch recipes/slurm/sft.sbatch, salloc)}"
: "${SLURM_JOB_NODELIST:?launch.sh runs inside a SLURM allocation (sbatch recipes/slurm/sft.sbatch, salloc)}"
export SCRIPT
export ACCELERATE=${ACCELERATE:-.venv/bin/accelerate}
export GPUS_PER_NODE=${GPUS_PER_NODE:-8}
export MASTER_PORT=${MASTER_PORT:-29500}
MASTER_ADDR=$(scontrol show hostnames "${SLURM_JOB_NODELIST}" | head -n 1)
export MASTER_ADDR

# the Python that accelerate runs: the one that must import DeepSpeed
accelerate_path=$(command -v "${ACCELERATE}") || die "no accelerate program at '${ACCELERATE}': set ACCELERATE"
PYTHON=${PYTHON:-$(dirname "${accelerate_path}")/python}
command -v "${PYTHON}" >/dev/null || die "no Python at '${PYTHON}' (the one ${ACCELERATE} runs): set PYTHON"

deepspeed_missing() {  # prints why `import deepspeed` fails in that Python; fails (status 1) when it imports
    local reason
    if reason=$("${PYTHON}" -c "import deepspeed" 2>&1 >/dev/null); then return 1; fi
    reason=$(printf '%s\n' "${reason}" | grep -v '^[[:space:]]*$' | tail -n 1)
    echo "${reason:-import deepspeed failed}"
}

if [ -z "${ACCELERATE_CONFIG:-}" ]; then
    ACCELERATE_CONFIG=recipes/accelerate/zero3.yaml
    if reason=$(deepspeed_missing); then
        ACCELERATE_CONFIG=recipes/accelerate/fsdp.yaml
        echo "launch.sh: DeepSpeed does not import in ${PYTHON} (${reason}): training with FSDP2" \
            "(${ACCELERATE_CONFIG}) instead of the default DeepSpeed ZeRO-3; for ZeRO-3 install the gpu extra" \
            "(pip install -e '.[gpu]', or pip install deepspeed)" >&2
    fi
else
    [ -f "${ACCELERATE_CONFIG}" ] || die "ACCELERATE_CONFIG=${ACCELERATE_CONFIG}: no such file"
    if grep -Eq '^distributed_type:[[:space:]]*["'\'']?DEEPSPEED' "${ACCELERATE_CONFIG}" \
        && reason=$(deepspeed_missing); then
        die "ACCELERATE_CONFIG=${ACCELERATE_CONFIG} is a DeepSpeed config, and DeepSpeed does not import in" \
            "${PYTHON} (${reason}): install the gpu extra (pip install -e '.[gpu]', or pip install deepspeed)," \
            "or choose ACCELERATE_CONFIG=recipes/accelerate/fsdp.yaml"
    fi
fi
export ACCELERATE_CONFIG

# srun of Slurm 22.05 to 23.02 does not give its tasks the batch job's --cpus-per-task (each node's ranks would
# share one CPU): say it, as a flag and as SRUN_CPUS_PER_TASK (which srun of 23.11 and later reads)
srun_args=(--ntasks="${SLURM_NNODES}" --ntasks-per-node=1)
if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then
    export SRUN_CPUS_PER_TASK=${SLURM_CPUS_PER_TASK}
    srun_args+=(--cpus-per-task="${SLURM_CPUS_PER_TASK}")
fi

# one launcher per node; SLURM_PROCID is that node's rank
srun "${srun_args[@]}" bash -c '"${ACCELERATE}" launch \
    --config_file "${ACCELERATE_CONFIG}" --num_machines "${SLURM_NNODES}" \
    --num_processes "$((SLURM_NNODES * GPUS_PER_NODE))" --machine_rank "${SLURM_PROCID}" \
    --main_process_ip "${MASTER_ADDR}" --main_process_port "${MASTER_PORT}" \
    "${SCRIPT}" "$@"' launch --config "${CONFIG}" "$@"
