#!/bin/bash
# The body of the training sbatch files: one `accelerate launch SCRIPT --config RECIPE [flags]` per node
# (DeepSpeed ZeRO-3 unless ACCELERATE_CONFIG says otherwise), the first node the rendezvous.
#   bash recipes/slurm/launch.sh train/grpo.py RECIPE.yaml [flags]      (inside an allocation)
set -euo pipefail

SCRIPT=${1:?usage: launch.sh train/SCRIPT.py RECIPE.yaml [flags]}
CONFIG=${2:?usage: launch.sh train/SCRIPT.py RECIPE.yaml [flags]}
shift 2
mkdir -p logs
export SCRIPT
export ACCELERATE=${ACCELERATE:-.venv/bin/accelerate}
export ACCELERATE_CONFIG=${ACCELERATE_CONFIG:-recipes/accelerate/zero3.yaml}
export GPUS_PER_NODE=${GPUS_PER_NODE:-8}
export MASTER_ADDR=$(scontrol show hostnames "${SLURM_JOB_NODELIST}" | head -n 1)
export MASTER_PORT=${MASTER_PORT:-29500}

# one launcher per node; SLURM_PROCID is that node's rank
srun --ntasks="${SLURM_NNODES}" --ntasks-per-node=1 bash -c '"${ACCELERATE}" launch \
    --config_file "${ACCELERATE_CONFIG}" --num_machines "${SLURM_NNODES}" \
    --num_processes "$((SLURM_NNODES * GPUS_PER_NODE))" --machine_rank "${SLURM_PROCID}" \
    --main_process_ip "${MASTER_ADDR}" --main_process_port "${MASTER_PORT}" \
    "${SCRIPT}" "$@"' launch --config "${CONFIG}" "$@"
