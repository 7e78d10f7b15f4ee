"""Interactive work: a task's terminal and relay, shells, SSH and web apps in a job."""
