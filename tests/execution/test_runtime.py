"""The runtime selection table (issue: inline vs isolated)."""

import pytest

from wharf.config.settings import PoolResourceDemand, ResourceSettings
from wharf.config.spec import StepConfig
from wharf.core.enums import StepRuntime
from wharf.execution.runtime import select_runtime

INL, ISO = StepRuntime.INLINE, StepRuntime.ISOLATED


@pytest.mark.parametrize(
    ("config", "supports", "expected", "warns"),
    [
        (StepConfig(step_operator="op"), False, ISO, False),
        (StepConfig(step_operator="op", runtime=INL), True, ISO, False),
        (StepConfig(runtime=ISO), True, ISO, False),
        (StepConfig(runtime=INL, resources=ResourceSettings(cpu_count=2)), True, INL, False),
        (StepConfig(runtime=ISO), False, INL, True),
        (StepConfig(runtime=INL), False, INL, False),
        (StepConfig(resources=ResourceSettings(cpu_count=1)), True, ISO, False),
        (StepConfig(resources=ResourceSettings(memory="1GiB")), True, ISO, False),
        (StepConfig(resources=ResourceSettings(gpu_count=1)), True, ISO, False),
        (StepConfig(resources=ResourceSettings(gpu_count=0)), True, INL, False),
        (StepConfig(resources=ResourceSettings(resources={"license": 1})), True, INL, False),
        (
            StepConfig(
                resources=ResourceSettings(resources=PoolResourceDemand(name="g", kind="gpu"))
            ),
            True,
            ISO,
            False,
        ),
        (StepConfig(resources=ResourceSettings(cpu_count=1)), False, INL, False),
        (StepConfig(), True, INL, False),
    ],
)
def test_selection(config, supports, expected, warns):
    choice = select_runtime("s", config, supports)
    assert choice.runtime is expected
    assert (choice.warning is not None) is warns
    if warns:
        assert "cannot isolate" in choice.warning
