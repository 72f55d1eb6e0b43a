"""Kubernetes resource quantities (``100m``, ``1.5``, ``2Gi``, ``1e3``, ``500Mi``) as exact values.

``parse_quantity`` accepts what apimachinery's ``resource.ParseQuantity`` accepts (a signed decimal
number and one optional suffix: binary ``Ki…Ei``, decimal ``n u m k M G T P E`` or an exponent
``e3``/``E-2``; a JSON number is a quantity too) and returns its value as a ``Fraction``, so
requests and limits compare exactly. Anything else raises ``QuantityError`` with the real text.
"""

from __future__ import annotations

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
