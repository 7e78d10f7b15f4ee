"""Node health checks: measure what a node does, judge it against what it should do.

A check is a small named function that returns a :class:`~railyard.health.result.Result`:
pass / warn / fail / skip, the measured figure, the expected one, the fraction of it that
passes, and where the expectation came from. Expectations come from the node's own baseline
(recorded when the node was known good: `railyard health --record-baseline`) or, for GPU
inventory, from the node's declared flavor. Like Slurm's HealthCheckProgram (LBNL's Node
Health Check), `railyard health --drain NODE` runs on the node itself and drains it through
the control plane with the failing check's figure as the reason, and resumes it once every
check passes again, but only if the drain was its own.
"""
