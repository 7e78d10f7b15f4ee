"""The service loop: the store as the scheduler sees it, a step, its plan acted on."""
