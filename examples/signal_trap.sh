#!/bin/bash
# The usual way to stop before the time limit: --signal=B:USR1@50 sends SIGUSR1 to this shell
# alone, 50 s before the 1-minute limit. The trap asks the training to stop; the training (a
# background process the shell waits for) is not signalled itself, finishes its step, and the
# job ends COMPLETED, so jobs that depend on it with afterok run.
#SBATCH --job-name=trap
#SBATCH --time=1
#SBATCH --signal=B:USR1@50
#SBATCH --output=trap-%j.out
trap 'echo "USR1: asking the training to stop"; touch stop-$SLURM_JOB_ID' USR1
python3 -c "
import os, time
for step in range(60):
    if os.path.exists('stop-$SLURM_JOB_ID'):
        print(f'stopped cleanly at step {step}')
        break
    time.sleep(1)
" &
wait   # returns when the trap has run
wait   # then waits for the training to finish
echo "training exited $?"
rm -f stop-$SLURM_JOB_ID
