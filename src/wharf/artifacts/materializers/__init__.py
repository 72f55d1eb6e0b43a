"""Materializers: how values become files in an artifact store and back.

Only the dependency-free materializers are exported here. The numpy and pandas ones live in
``numpy_materializer`` and ``pandas_materializer`` and are imported by the registry only when a
numpy or pandas value is seen, so importing this package never imports numpy or pandas.
"""

from wharf.artifacts.materializers.base import Materializer
from wharf.artifacts.materializers.builtin import BuiltInContainerMaterializer, BuiltInMaterializer
from wharf.artifacts.materializers.cloudpickle_materializer import CloudpickleMaterializer

__all__ = [
    "BuiltInContainerMaterializer",
    "BuiltInMaterializer",
    "CloudpickleMaterializer",
    "Materializer",
]
