"""A real, tiny third-party distribution that declares Wharf flavors, written into a directory.

What ``pip install`` leaves behind, minus pip: a ``<name>-<version>.dist-info`` directory with
``METADATA`` and ``entry_points.txt``, and the distribution's modules beside it. Put the
directory on ``sys.path`` (``monkeypatch.syspath_prepend``, or ``PYTHONPATH`` for a subprocess)
and ``importlib.metadata`` finds its entry points as it finds any installed package's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

TINY_MODULE = "wharf_tiny_flavors"
"""The module of the distribution :func:`tiny_distribution` writes."""

TINY_SOURCE = '''
"""Flavors from outside Wharf: subclasses of Wharf's own, so that they run."""

from wharf.orchestrators.local import LocalOrchestrator
from wharf.step_operators.local_process import LocalProcessStepOperator


class TinyOrchestrator(LocalOrchestrator):
    """The local orchestrator under another name."""


class TinyStepOperator(LocalProcessStepOperator):
    """The local-process step operator under another name."""
'''


def write_distribution(
    directory: Path,
    name: str,
    entry_points: Mapping[str, str],
    modules: Mapping[str, str],
    *,
    version: str = "0.1",
) -> Path:
    """Write the distribution ``name`` declaring ``entry_points`` (``wharf.flavors`` name ->
    ``module:attribute``) with ``modules`` (module name -> source) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    info = directory / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = ["[wharf.flavors]", *(f"{key} = {value}" for key, value in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for module, source in modules.items():
        (directory / f"{module}.py").write_text(source)
    return directory


def tiny_distribution(directory: Path) -> Path:
    """``wharf-tiny-flavors``: orchestrator ``tiny`` and step operator ``tiny``."""
    return write_distribution(
        directory,
        "wharf_tiny_flavors",
        {
            "orchestrator.tiny": f"{TINY_MODULE}:TinyOrchestrator",
            "step_operator.tiny": f"{TINY_MODULE}:TinyStepOperator",
        },
        {TINY_MODULE: TINY_SOURCE},
    )
