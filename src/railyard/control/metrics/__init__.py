"""What ``/metrics`` exports: the control plane's state and the GPUs' figures."""
