"""Component flavors for SDK users: which are declared, and the class of one.

Flavors are ``wharf.flavors`` entry points (``<component type>.<flavor>``); the registry lives
in :mod:`wharf.config.flavors`.
"""

from wharf.config.flavors import (
    FLAVOR_GROUP,
    check_flavor,
    declared_flavors,
    flavor_class,
    known_flavors,
)

__all__ = ["FLAVOR_GROUP", "check_flavor", "declared_flavors", "flavor_class", "known_flavors"]
