"""The resource-kind registry drives every place that special-cases cpu, memory and gpu."""

import pytest

from wharf.config.settings import PoolResourceDemand, ResourceSettings
from wharf.core import resource_kinds as kinds
from wharf.resource_manager.domain import STOCK_DESCRIPTORS, descriptor_of, to_base
from wharf.resource_manager.embedded.local_pool import local_pool_spec


def test_first_class_kinds_and_custom_ones():
    assert [k.name for k in kinds.FIRST_CLASS_KINDS] == ["cpu", "memory", "gpu"]
    assert sorted(kinds.STOCK_RESOURCES) == ["CPU", "GPU", "memory"]
    assert kinds.kind_named("gpu") is kinds.GPU and kinds.kind_named("license") is None
    assert [kinds.is_basic(k) for k in ("cpu", "memory", "gpu", "license", None)] == [
        True,
        True,
        True,
        False,
        False,
    ]
    licence = kinds.custom_kind("License")
    assert (licence.name, licence.resource, licence.base_unit, licence.basic) == (
        "license",
        "License",
        "License",
        False,
    )
    assert kinds.CPU.multiplier("CPU") == 1000 and kinds.MEMORY.multiplier("GiB") == 2**30


def test_a_kind_needs_one_base_unit_and_a_known_default():
    with pytest.raises(ValueError, match="one base unit"):
        kinds.ResourceKind("tpu", "TPU", (("TPU", 2),), "TPU", basic=True)
    with pytest.raises(ValueError, match="default unit"):
        kinds.ResourceKind("tpu", "TPU", (("TPU", 1),), "core", basic=True)


def test_stock_descriptors_are_the_registry():
    assert [(d.name, d.kind) for d in STOCK_DESCRIPTORS] == [
        (k.resource, k.name) for k in kinds.FIRST_CLASS_KINDS
    ]
    cpu = descriptor_of(kinds.CPU)
    assert to_base(cpu, 2, "CPU") == 2000 and cpu.default_unit == "CPU"


def test_settings_and_runtime_selection_read_the_registry():
    assert ResourceSettings(resources=PoolResourceDemand(kind="gpu")).has_basic_resource_demands
    assert not ResourceSettings(resources={"license": 1}).has_basic_resource_demands
    (cpu,) = ResourceSettings(cpu_count=0.25).canonical_demands()
    assert (cpu.kind, cpu.quantity, cpu.unit) == ("cpu", 250, kinds.CPU.base_unit)


def test_the_local_pool_offers_the_stock_resources():
    spec = local_pool_spec(cpus=2, memory_bytes=1024, gpus=[{"model": "x"}], isolated_step_slots=1)
    capacities = [dict(c.capacity) for c in spec.classes]
    assert capacities == [{"CPU": 2000, "memory": 1024}, {"GPU": 1}]
