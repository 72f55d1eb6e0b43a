"""The user-facing SDK: ``@step``, ``@pipeline``, ``Client`` and the step context."""
