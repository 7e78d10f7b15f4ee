"""Tracking and confining a job's processes with cgroups (v1, v2, eBPF device filter)."""
