"""Performance twin: collectives, training steps, memory and checkpoints from a blueprint."""
