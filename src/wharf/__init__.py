"""Wharf: ML pipelines on shared, scarce compute."""

__version__ = "0.1.0"
