"""Kubernetes resource quantities (``100m``, ``1.5``, ``2Gi``, ``1e3``, ``500Mi``) as exact values.

``parse_quantity`` accepts what apimachinery's ``resource.ParseQuantity`` accepts (a signed decimal
number and one optional suffix: binary ``Ki…Ei``, decimal ``n u m k M G T P E`` or an exponent
``e3``/``E-2``; a JSON number is a quantity too) and returns its value as a ``Fraction``, so
requests and limits compare exactly. Anything else raises ``QuantityError`` with the real text.
``canonical_quantity`` gives the form a real server writes back (``0.5`` → ``500m``, ``1024Mi``
→ ``1Gi``, ``4000M`` → ``4G``, ``1000`` → ``1k``), keeping the family of the suffix written.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

QUANTITY_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_FORMAT_ERROR = f"quantities must match the regular expression '{QUANTITY_PATTERN}'"

_QUANTITY_RE = re.compile(r"([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)(.*)")
_EXPONENT_RE = re.compile(r"[eE]([+-]?[0-9]+)")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class QuantityError(ValueError):
    """Not a quantity (the message is the one a real server's decoder gives)."""


def parse_quantity(value: Any) -> Fraction:
    """The exact value of a quantity given as a string or a JSON number."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    if isinstance(value, int | float):
        return Fraction(value)
    match = _QUANTITY_RE.fullmatch(value.strip() if value.strip() == value else "\0")
    if match is None:
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    sign, number, suffix = match.groups()
    magnitude = Fraction(number if not number.endswith(".") else number[:-1])
    if suffix in _BINARY:
        magnitude *= 2 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        magnitude *= Fraction(10) ** _DECIMAL[suffix]
    elif (exponent := _EXPONENT_RE.fullmatch(suffix)) is not None:
        magnitude *= Fraction(10) ** int(exponent.group(1))
    else:
        raise QuantityError("unable to parse quantity's suffix")
    return -magnitude if sign == "-" else magnitude


def is_quantity(value: Any) -> bool:
    try:
        parse_quantity(value)
    except QuantityError:
        return False
    return True


_DECIMAL_SUFFIXES = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_BINARY_SUFFIXES = {0: "", **{exponent: suffix for suffix, exponent in _BINARY.items()}}


def _format_of(value: Any) -> str:
    match = _QUANTITY_RE.fullmatch(value) if isinstance(value, str) else None
    if match is not None:
        suffix = match.group(3)
        if suffix in _BINARY:
            return "binary"
        if _EXPONENT_RE.fullmatch(suffix):
            return "exponent"
    return "decimal"


def canonical_quantity(value: Any) -> str:
    """The canonical text of a quantity, as a real server serialises it after a write."""
    amount = parse_quantity(value)
    amount = Fraction(math.ceil(amount * 10**9), 10**9)  # servers keep nano precision, rounding up
    if amount == 0:
        return "0"
    sign, magnitude = ("-" if amount < 0 else ""), abs(amount)
    family = _format_of(value)
    if family == "binary" and magnitude >= 1024 and magnitude.denominator == 1:
        number, exponent = int(magnitude), 0
        while number % 1024 == 0 and exponent < 60:
            number, exponent = number // 1024, exponent + 10
        return f"{sign}{number}{_BINARY_SUFFIXES[exponent]}"
    exponent = -9  # nano precision: the magnitude is a whole number of units of 10**-9
    while exponent < 18 and (magnitude / Fraction(10) ** (exponent + 3)).denominator == 1:
        exponent += 3
    number = int(magnitude / Fraction(10) ** exponent)
    if family == "exponent":
        return f"{sign}{number}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{number}{_DECIMAL_SUFFIXES[exponent]}"
