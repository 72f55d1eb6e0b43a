"""Component flavors, re-exported for SDK users (the table lives in ``wharf.config.flavors``)."""

from wharf.config.flavors import FLAVORS, flavor_class

__all__ = ["FLAVORS", "flavor_class"]
