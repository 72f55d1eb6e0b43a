"""The fallback materializer: any picklable value, via cloudpickle.

Invariants: ``cloudpickle`` is imported on first use, not at import time; a pickle can only be
loaded with compatible Python and library versions, and loading it runs code, so the registry
warns when it falls back to this materializer.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from wharf.artifacts.materializers.base import Materializer

_PICKLE_FILE = "data.pkl"
_VERSIONS_FILE = "versions.json"


def _python_version() -> str:
    return ".".join(str(part) for part in sys.version_info[:3])


class CloudpickleMaterializer(Materializer):
    """Pickles any value with cloudpickle; the registry's fallback.

    Files: ``data.pkl`` (the cloudpickle bytes) and ``versions.json`` (the Python and
    cloudpickle versions that wrote it, quoted when loading fails). The pickle embeds the
    value's classes (by reference, or by value for classes defined in ``__main__``), so
    loading needs no recorded type (``NEEDS_DATA_TYPE = False``)."""

    ASSOCIATED_TYPES = (object,)
    NEEDS_DATA_TYPE = False

    def save(self, data: Any) -> None:
        import cloudpickle

        payload = cloudpickle.dumps(data, protocol=cloudpickle.DEFAULT_PROTOCOL)
        self.write_bytes(_PICKLE_FILE, payload)
        versions = {"python": _python_version(), "cloudpickle": cloudpickle.__version__}
        self.write_bytes(_VERSIONS_FILE, json.dumps(versions, sort_keys=True).encode())

    def load(self, data_type: type[Any]) -> Any:
        import cloudpickle

        payload = self.read_bytes(_PICKLE_FILE)
        try:
            return cloudpickle.loads(payload)
        except Exception as exc:
            written = self._written_with()
            here = f"Python {_python_version()} with cloudpickle {cloudpickle.__version__}"
            if written == here:  # the versions are not the cause: say what else is
                cause = (
                    f"the value was pickled with these same versions ({here}), so a module or "
                    "class it refers to by name is missing or different in this process"
                )
            else:
                cause = f"the value was pickled with {written}, this is {here}"
            raise RuntimeError(f"unpickling failed ({type(exc).__name__}: {exc}); {cause}") from exc

    def _written_with(self) -> str:
        try:
            versions = json.loads(self.read_bytes(_VERSIONS_FILE))
            return f"Python {versions['python']} with cloudpickle {versions['cloudpickle']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "unknown versions"
