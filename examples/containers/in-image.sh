#!/bin/bash
#SBATCH --job-name=in-image
#SBATCH --gres=gpu:1
#SBATCH --container-image=localhost/railyard-host:1
#SBATCH --container-mounts=/usr:/usr:ro
#SBATCH --output=in-image-%j.out
# Every task runs in the image, as the submitting user, with only its own GPU.
grep PRETTY_NAME /etc/os-release || grep NAME /etc/os-release
echo "user $(id -un) uid $(id -u) in $PWD, job $SLURM_JOB_ID, CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
