"""Many machines through Ray: node agents, their token, the backend and executor."""
