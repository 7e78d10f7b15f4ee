#!/bin/bash
#SBATCH --job-name=sweep
#SBATCH --gres=gpu:1
#SBATCH --array=0-3%2
#SBATCH --time=00:10:00
echo "task $SLURM_ARRAY_TASK_ID of array $SLURM_ARRAY_JOB_ID is job $SLURM_JOB_ID on GPU $CUDA_VISIBLE_DEVICES"
