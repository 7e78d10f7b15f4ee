"""Public GPU-cluster traces converted to railyard's CSV (see traces.json and ../NOTICE.md)."""
