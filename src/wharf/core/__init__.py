"""Pure domain of Wharf: ids, statuses and their transition tables, DAGs, cache keys, errors.

Nothing in this package performs I/O or reads a clock; it imports only the standard library
and pydantic (an import-linter contract enforces this).
"""
