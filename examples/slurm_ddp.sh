#!/bin/bash
# A Slurm batch script that runs unchanged under sbatch and under `railyard submit`:
# the script runs once, on the job's first node; `srun` starts one task per node
# (--ntasks-per-node=1), and each task runs torchrun, which starts one process per GPU and
# gives each its RANK and LOCAL_RANK (every process sees all the node's GPUs).
#SBATCH --job-name=ddp-srun
#SBATCH --nodes=1
#SBATCH --gres=gpu:2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=2
#SBATCH --time=00:10:00
#SBATCH --output=ddp-%j.out

echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: $SLURM_NNODES node(s), $SLURM_GPUS_ON_NODE GPUs each"
# Single quotes: the variables are the task's. railyard's srun sets MASTER_ADDR (the first
# node) and MASTER_PORT (a free port there); Slurm's does not, so fall back to scontrol.
srun bash -c 'torchrun --nnodes "$SLURM_NNODES" --node-rank "$SLURM_NODEID" \
    --nproc-per-node "$SLURM_GPUS_ON_NODE" \
    --master-addr "${MASTER_ADDR:-$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)}" \
    --master-port "${MASTER_PORT:-29500}" \
    examples/ddp_train.py --steps 40 --ckpt-every 10'
echo "exit $?"
