"""Orchestrators: they take a compiled snapshot and a placeholder run and run the steps."""
