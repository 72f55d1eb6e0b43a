"""The fallback materializer: any picklable value, via cloudpickle.

Invariants: ``cloudpickle`` is imported on first use, not at import time; a pickle can only be
loaded with compatible Python and library versions, and loading it runs code, so the registry
warns when it falls back to this materializer; the pickle streams to and from the store, so a
big ``bytes`` or array in the value is never held twice in memory.

A class of the user's script (:mod:`~wharf.artifacts.materializers.script_classes`) is pickled
as a call to :func:`script_class`: loaded where that script is loaded (the script's process, a
step's own process), it is the script's live class, so ``isinstance`` holds whether the value
was just made or comes from a cached step; anywhere else it is the class pickled by value. The
script's module in a step's process (``__wharf_script__``) is pickled by value, as cloudpickle
pickles ``__main__``: no other process can import it.
"""

from __future__ import annotations

import functools
import json
import pickle
import sys
from typing import IO, Any

from wharf.artifacts.materializers.base import READ_CHUNK, Materializer
from wharf.artifacts.materializers.script_classes import (
    SCRIPT_MODULE,
    live_script_class,
    script_file_of,
)

_PICKLE_FILE = "data.pkl"
_VERSIONS_FILE = "versions.json"


def _python_version() -> str:
    return ".".join(str(part) for part in sys.version_info[:3])


def script_class(file_name: str, qualname: str, by_value: bytes) -> type:
    """Unpickles a class of the script ``file_name``: the class ``qualname`` of that script if
    this process has it loaded, else the class pickled by value in ``by_value``. Its import
    path is recorded in pickles: keep it."""
    live = live_script_class(file_name, qualname)
    if live is not None:
        return live
    pickled: type = pickle.loads(by_value)
    return pickled


@functools.cache
def _pickler() -> type[Any]:
    """cloudpickle's pickler, with the script's classes reduced to :func:`script_class`."""
    import cloudpickle

    class ScriptClassPickler(cloudpickle.Pickler):  # type: ignore[misc]
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, type):
                file_name = script_file_of(obj)
                if file_name is not None:
                    by_value = cloudpickle.dumps(obj, protocol=cloudpickle.DEFAULT_PROTOCOL)
                    return script_class, (file_name, obj.__qualname__, by_value)
            return super().reducer_override(obj)

    return ScriptClassPickler


def _dump(data: Any, file: IO[bytes]) -> None:
    """Pickle ``data`` into ``file`` as it goes: big buffers (``bytes``, numpy arrays) are
    written straight from the value, never gathered into one pickle in memory first."""
    import cloudpickle

    script = sys.modules.get(SCRIPT_MODULE)
    if script is not None:  # by value, as __main__ is: only this process has it (idempotent)
        cloudpickle.register_pickle_by_value(script)
    _pickler()(file, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(data)


class CloudpickleMaterializer(Materializer):
    """Pickles any value with cloudpickle; the registry's fallback.

    Files: ``data.pkl`` (the cloudpickle bytes) and ``versions.json`` (the Python and
    cloudpickle versions that wrote it, quoted when loading fails). The pickle embeds the
    value's classes (by reference, by value for classes of no importable module, by
    :func:`script_class` for the script's), so loading needs no recorded type
    (``NEEDS_DATA_TYPE = False``)."""

    ASSOCIATED_TYPES = (object,)
    NEEDS_DATA_TYPE = False

    def save(self, data: Any) -> None:
        import cloudpickle

        with self.artifact_store.open(self.file_uri(_PICKLE_FILE), "wb") as f:
            _dump(data, f)
        versions = {"python": _python_version(), "cloudpickle": cloudpickle.__version__}
        self.write_bytes(_VERSIONS_FILE, json.dumps(versions, sort_keys=True).encode())

    def load(self, data_type: type[Any]) -> Any:
        import cloudpickle

        with self.artifact_store.open(self.file_uri(_PICKLE_FILE), "rb") as f:
            try:
                return cloudpickle.load(_PartReader(f))
            except OSError:  # the store failed, not the pickle
                raise
            except Exception as exc:
                error = exc  # explained once the file is closed
        written = self._written_with()
        here = f"Python {_python_version()} with cloudpickle {cloudpickle.__version__}"
        if written == here and isinstance(error, EOFError | pickle.UnpicklingError):
            # the pickle stream itself is broken (ends early, bad opcode): no name is to blame
            cause = (
                f"the pickle file is damaged (cut short or not a pickle); it was written with "
                f"these same versions ({here})"
            )
        elif written == here:  # the versions are not the cause: say what else is
            cause = (
                f"the value was pickled with these same versions ({here}), so a module or "
                "class it refers to by name is missing or different in this process"
            )
        else:
            cause = f"the value was pickled with {written}, this is {here}"
        raise RuntimeError(
            f"unpickling failed ({type(error).__name__}: {error}); {cause}"
        ) from error

    def _written_with(self) -> str:
        try:
            versions = json.loads(self.read_bytes(_VERSIONS_FILE))
            return f"Python {versions['python']} with cloudpickle {versions['cloudpickle']}"
        except (OSError, ValueError, KeyError, TypeError):
            return "unknown versions"


class _PartReader:
    """The pickle file as the unpickler reads it, a part at a time: it reads each big
    ``bytes``/array straight into the value it builds (``readinto``), which a remote store's
    reader would otherwise fetch whole into memory first."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self.read = file.read
        self.readline = file.readline

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < view.nbytes:
            part = self._file.read(min(READ_CHUNK, view.nbytes - done))
            if not part:
                break
            view[done : done + len(part)] = part
            done += len(part)
        return done
