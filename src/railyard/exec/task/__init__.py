"""Inside a job: each task's wrapper, environment, identity, outputs, and srun's steps."""
