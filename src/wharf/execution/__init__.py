"""Running steps and pipelines: cache resolution, step launch and retries, the DAG runner."""
