"""Descriptors, units and exact quantities."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from wharf.core.errors import InputError
from wharf.resource_manager.domain import (
    CPU,
    GPU,
    MEMORY,
    STOCK_DESCRIPTORS,
    Quantity,
    ResourceDescriptor,
    Unit,
    descriptors_by_name,
    format_base,
    format_human,
    parse_quantity,
    to_base,
)

LICENSE = ResourceDescriptor(
    name="license",
    kind="license",
    units=(Unit(name="seat", multiplier=1), Unit(name="pack", multiplier=10)),
)


def test_stock_descriptors_exist_with_their_units():
    assert [d.name for d in STOCK_DESCRIPTORS] == ["CPU", "memory", "GPU"]
    assert CPU.unit_names == ("mCPU", "CPU")
    assert GPU.unit_names == ("GPU",)
    assert {"B", "KB", "KiB", "MB", "MiB", "GB", "GiB", "TB", "TiB"} <= set(MEMORY.unit_names)


@pytest.mark.parametrize(
    ("descriptor", "quantity", "unit", "base"),
    [
        (CPU, 2, "CPU", 2000),
        (CPU, 500, "mCPU", 500),
        (CPU, 3, None, 3000),  # default unit CPU
        (MEMORY, 2, "GiB", 2 * 1024**3),
        (MEMORY, 2, "GB", 2 * 1000**3),
        (MEMORY, 1, "KiB", 1024),
        (MEMORY, 7, None, 7),  # default unit bytes
        (GPU, 8, "GPU", 8),
        (LICENSE, 3, "pack", 30),
        (LICENSE, 0, "seat", 0),
    ],
)
def test_to_base_is_exact(descriptor, quantity, unit, base):
    assert to_base(descriptor, quantity, unit) == base


@pytest.mark.parametrize(
    ("quantity", "unit", "message"),
    [
        (1, "TPU", "Unknown unit 'TPU' for resource 'CPU'; known units: mCPU, CPU."),
        (1, "cpu", "Unknown unit 'cpu'"),  # units are case-sensitive
        (-1, "CPU", "must not be negative"),
        (1.5, "CPU", "must be a whole number"),
        (2.0, "CPU", "must be a whole number"),
        (True, "CPU", "must be a whole number"),
        ("2", "CPU", "must be a whole number"),
    ],
)
def test_to_base_rejects_bad_input_with_clear_messages(quantity, unit, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        to_base(CPU, quantity, unit)


@pytest.mark.parametrize(
    ("descriptor", "text", "base"),
    [
        (MEMORY, "512GiB", 512 * 1024**3),
        (MEMORY, "512 GiB", 512 * 1024**3),
        (MEMORY, "1.5KiB", 1536),
        (CPU, "1.5CPU", 1500),
        (CPU, "250mCPU", 250),
        (CPU, "2", 2000),
        (GPU, "8", 8),
        (GPU, "+8GPU", 8),
    ],
)
def test_parse_quantity(descriptor, text, base):
    assert parse_quantity(descriptor, text) == base


@pytest.mark.parametrize(
    ("descriptor", "text", "message"),
    [
        (CPU, "0.0005CPU", "not a whole number of mCPU"),
        (GPU, "0.5GPU", "not a whole number of GPU"),
        (MEMORY, "-1GiB", "must not be negative"),
        (MEMORY, "1 XB", "Unknown unit 'XB' for resource 'memory'"),
        (MEMORY, "GiB", "Cannot parse quantity 'GiB'"),
        (MEMORY, "1e9B", "Cannot parse quantity"),
    ],
)
def test_parse_quantity_rejects(descriptor, text, message):
    with pytest.raises(InputError, match=message):
        parse_quantity(descriptor, text)


@pytest.mark.parametrize(
    ("descriptor", "base", "text"),
    [
        (MEMORY, 8 * 1024**3, "8 GiB"),
        (MEMORY, 1500, "1500 B"),
        (MEMORY, 2000, "2 KB"),
        (CPU, 2500, "2500 mCPU"),
        (CPU, 3000, "3 CPU"),
        (GPU, 0, "0 GPU"),
        (GPU, None, "unlimited GPU"),
    ],
)
def test_format_base_uses_the_largest_exact_unit(descriptor, base, text):
    assert format_base(descriptor, base) == text


@pytest.mark.parametrize(
    ("descriptor", "base", "text"),
    [
        (MEMORY, 24683664 * 1024, "23.5 GiB"),  # a machine's memory, not "24683664 KiB"
        (MEMORY, 8 * 1024**3, "8 GiB"),
        (MEMORY, 1536 * 1024**2, "1.5 GiB"),
        (MEMORY, 512 * 10**9, "512 GB"),  # exact in the unit it was given in
        (MEMORY, 1500, "1500 B"),
        (CPU, 1500, "1.5 CPU"),
        (CPU, 1234, "1234 mCPU"),
        (CPU, 12345, "12.3 CPU"),
        (CPU, 12350, "12.35 CPU"),
        (CPU, 123456, "123.5 CPU"),
        (GPU, 0, "0 GPU"),
        (GPU, None, "unlimited GPU"),
        # Past 2**53 a float loses digits: these showed as 100000000000000004764729344 GPU
        # and 97656249999999991633936384.0 PiB (the exact value rounds to this one).
        (GPU, 10**26 - 1, f"{10**26 - 1} GPU"),
        (MEMORY, (10**29 - 1) * 1024**4, "97656250000000000000000000.0 PiB"),
    ],
)
def test_format_human_is_exact_when_short_else_one_decimal(descriptor, base, text):
    assert format_human(descriptor, base) == text


@pytest.mark.parametrize(
    ("units", "default", "message"),
    [
        ([("a", 1), ("a", 2)], None, "Duplicate unit names: a"),
        ([("a", 2), ("b", 4)], None, "exactly one base unit"),
        ([("a", 1), ("b", 1)], None, "exactly one base unit"),
        ([("a", 1)], "z", "Default unit 'z' is not one of the units"),
    ],
)
def test_descriptor_validation(units, default, message):
    with pytest.raises(ValidationError, match=message):
        ResourceDescriptor(
            name="x",
            kind="custom",
            units=tuple(Unit(name=n, multiplier=m) for n, m in units),
            default_unit=default,
        )


@pytest.mark.parametrize("multiplier", [0, -1])
def test_unit_multipliers_are_positive(multiplier):
    with pytest.raises(ValidationError):
        Unit(name="x", multiplier=multiplier)


def test_descriptor_names_must_be_unique_in_a_catalogue():
    assert set(descriptors_by_name(list(STOCK_DESCRIPTORS))) == {"CPU", "memory", "GPU"}
    with pytest.raises(InputError, match="defined twice"):
        descriptors_by_name([GPU, GPU])


def test_quantity_value_type():
    two_gib = Quantity.of(MEMORY, 2, "GiB")
    assert two_gib.base == 2 * 1024**3
    assert two_gib.in_unit("MiB") == 2048
    assert str(two_gib) == "2 GiB"
    assert Quantity.parse(CPU, "1.5CPU") == Quantity(CPU, 1500)
    with pytest.raises(InputError, match="1500 mCPU is not a whole number of CPU"):
        Quantity(CPU, 1500).in_unit("CPU")
    with pytest.raises(InputError, match="Unknown unit"):
        two_gib.in_unit("GPU")
