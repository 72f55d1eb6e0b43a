"""The ids a dynamic run gives its step calls (each step run's name in the run).

Owns :class:`StepIds`: a step's first call is named after it, later ones ``name_2``,
``name_3``...; the steps of a ``map`` are named by index, ``name_0``, ``name_1``..., a later
map of the same step ``name_2_0``...; an explicit ``id=`` already given out is refused.
Invariants: ids are unique within the run; an id whose step run or output artifact
(``PIPELINE::STEP::OUTPUT``) could not be stored under the 255-character name limit is refused
when the step is called, before anything is written, as a static pipeline refuses it when it is
compiled (``wharf.core.names.check_artifact_names``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from wharf.core.errors import InputError, StepInterfaceError
from wharf.core.names import check_artifact_names
from wharf.core.suggestions import unmatched


class StepIds:
    """The step ids of one dynamic run of pipeline ``pipeline``."""

    def __init__(self, pipeline: str) -> None:
        self._pipeline = pipeline
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._taken: set[str] = set()
        """Every invocation id given out in this run."""

    def check(self, step_id: str, outputs: Iterable[str]) -> None:
        """Refuse ``step_id`` if it, or an artifact of ``outputs`` named after it, is longer
        than a stored name may be."""
        try:
            check_artifact_names(self._pipeline, step_id, outputs)
        except InputError as exc:
            raise StepInterfaceError(str(exc)) from None

    def fresh(self, name: str, outputs: Iterable[str]) -> str:
        """``name`` for its first call, then ``name_2``, ``name_3``... (skipping taken ids)."""
        with self._lock:
            while True:
                n = self._counts.get(name, 0) + 1
                candidate = name if n == 1 else f"{name}_{n}"
                if candidate not in self._taken:
                    break
                self._counts[name] = n
            self.check(candidate, outputs)  # refused: not given out (a later call is too)
            self._counts[name] = n
            self._taken.add(candidate)
            return candidate

    def fresh_map(self, name: str, count: int, outputs: Iterable[str]) -> list[str]:
        """The ids of one map's ``count`` steps: ``name_0``...; for a later map of the same
        step, the first free prefix among ``name_2``, ``name_3``... (``name_2_0``...)."""
        outputs = list(outputs)
        with self._lock:
            prefix, k = name, 1
            while any(f"{prefix}_{i}" in self._taken for i in range(count)):
                k += 1
                prefix = f"{name}_{k}"
            ids = [f"{prefix}_{i}" for i in range(count)]
            if ids:
                self.check(ids[-1], outputs)  # the longest of them
            self._taken.update(ids)
            return ids

    def take(self, step_id: str, step_name: str, outputs: Iterable[str]) -> None:
        """Reserve an id the caller chose; one already given out is an error, at the call
        (two steps under one id would leave only one of them in the run)."""
        with self._lock:
            if step_id in self._taken:
                raise StepInterfaceError(
                    f"Step id '{step_id}' (step '{step_name}') is already used in "
                    "this run; give each call of a dynamic pipeline a unique id=."
                )
            self.check(step_id, outputs)
            self._taken.add(step_id)

    def check_after(self, step_id: str, name: str) -> None:
        """Refuse ``after=name`` in the call of step ``step_id`` if ``name`` is no id given out
        in this run (a misspelt one: with the ids it may have meant)."""
        with self._lock:
            known = sorted(self._taken - {step_id})
        if name not in known:
            raise StepInterfaceError(
                f"Step '{step_id}' runs after step '{name}', which this run has not called"
                + unmatched(name, known, "steps", none="it has called no other step yet")
            )


__all__ = ["StepIds"]
