"""The user's pipeline script under its two module names, for classes defined in it.

The script is module ``__main__`` in the process that runs it and :data:`SCRIPT_MODULE`
(``__wharf_script__``) in a step's own process, which executes the script under that name
(:mod:`wharf.execution.step_runner`). A class, or a materializer, defined in the script must be
found under either name: :func:`script_aliases` gives both for import paths recorded by either
process, :func:`script_file_of` tells whether a class is one of the loaded script's, and
:func:`live_script_class` finds a class of the script loaded in this process.

An artifact records such a class with the script's file name (``__main__:Point@train.py``:
:func:`with_script_file`, :func:`split_script_file`), so that another script, whose
``__main__`` may define another class of that name, is never given it by mistake.

Invariants: nothing here imports or executes a module; a ``__main__`` without a file (``python
-c``, a notebook) is no script; a class matches by the script's file name and the class's
qualified name. The file name, not its path, because a step operator or the Kubernetes
orchestrator runs a copy of the script from the code archive at another path; it keeps apart a
script that loads artifacts and happens to define a class of the same name.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

MAIN = "__main__"
SCRIPT_MODULE = "__wharf_script__"
"""The module name a step's own process executes the user's script under."""


def script_aliases(module_name: str) -> tuple[str, ...]:
    """The module names to look ``module_name:qualname`` up in: the script's two names when it
    is either of them (the given one first), else only ``module_name``."""
    if module_name == MAIN:
        return (MAIN, SCRIPT_MODULE)
    if module_name == SCRIPT_MODULE:
        return (SCRIPT_MODULE, MAIN)
    return (module_name,)


def _script_path(module: ModuleType | None) -> str | None:
    path = getattr(module, "__file__", None)
    return path if isinstance(path, str) and path else None


def _attribute(module: ModuleType, qualname: str) -> object | None:
    obj: object = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def script_file_of(cls: type) -> str | None:
    """The file name of the script loaded in this process that defines ``cls`` (as
    ``module.<qualname>``), if it is such a class; else None."""
    module_name = getattr(cls, "__module__", None)
    if module_name not in (MAIN, SCRIPT_MODULE):
        return None
    module = sys.modules.get(module_name)
    path = _script_path(module)
    if module is None or path is None:
        return None
    qualname = getattr(cls, "__qualname__", None)
    if not isinstance(qualname, str) or _attribute(module, qualname) is not cls:
        return None  # defined in a function, or shadowed: the script does not name it
    return os.path.basename(path)


def live_script_class(file_name: str, qualname: str) -> type | None:
    """The class ``qualname`` of the script ``file_name`` as loaded in this process (as
    ``__wharf_script__`` in a step's process, as ``__main__`` in the script's own), if any."""
    for name in (SCRIPT_MODULE, MAIN):
        module = sys.modules.get(name)
        path = _script_path(module)
        if module is not None and path is not None and os.path.basename(path) == file_name:
            found = _attribute(module, qualname)
            if isinstance(found, type):
                return found
    return None


SCRIPT_FILE_MARK = "@"
"""Separates a recorded script class's qualified name from its script's file name (a qualified
name never holds it)."""


def with_script_file(path: str, cls: type) -> str:
    """``path`` (``cls``'s ``module:qualname``) with ``@<script file name>`` appended when ``cls``
    is a class of the script loaded in this process (:func:`script_file_of`)."""
    file_name = script_file_of(cls)
    return path if file_name is None else f"{path}{SCRIPT_FILE_MARK}{file_name}"


def split_script_file(module_name: str, qualname: str) -> tuple[str, str | None]:
    """A recorded ``qualname`` without its script's file name, and that file name (None: not
    recorded, as in records made before it was, or a module's class)."""
    if module_name not in (MAIN, SCRIPT_MODULE):
        return qualname, None
    name, mark, file_name = qualname.partition(SCRIPT_FILE_MARK)
    return (name, file_name) if mark and file_name else (name, None)


def running_script() -> str | None:
    """The file name of the script this process runs (in a step's process the script it
    executes, else ``__main__``'s); None for a ``__main__`` without a file (a notebook)."""
    for name in (SCRIPT_MODULE, MAIN):
        path = _script_path(sys.modules.get(name))
        if path is not None:
            return os.path.basename(path)
    return None
