#!/bin/bash
#SBATCH -o logs/%x-%A_%a.out
#SBATCH -e /tmp/%u-%j.err
true
