"""The live control plane: a durable store, a REST API and the service loop that drives the
scheduler core on the wall clock and acts through an executor."""
