"""Step operators: run single steps somewhere else (another process, a cluster)."""
