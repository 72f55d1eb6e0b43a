"""The public names of ``wharf`` (ARCHITECTURE.md §3) never change by accident."""

import wharf


def test_public_names():
    assert set(wharf.__all__) == {
        "CachePolicy",
        "Client",
        "ExecutionMode",
        "ExecutionStatus",
        "PoolResourceDemand",
        "ResourceSettings",
        "RetryConfig",
        "RunFailedError",
        "Schedule",
        "StepRuntime",
        "get_step_context",
        "pipeline",
        "step",
        "unmapped",
    }
    for name in wharf.__all__:
        assert getattr(wharf, name) is not None


def test_unmapped_is_the_dynamic_wrapper():
    from wharf.execution.dynamic_futures import unmapped

    assert wharf.unmapped is unmapped
