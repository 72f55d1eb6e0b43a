"""The shape the orchestrator pod's SIGTERM contexts share: :class:`SigtermClaim`, a context
that claims the SIGTERMs of one cause (``orchestrator_terminated``: any the run loop does not
handle; ``orchestrator_deadline``: one at the Job's deadline) and raises for the first.

Invariants: it hooks in through :func:`~wharf.execution.signals.sigterm_hook`, given back on
exit; it raises once, in the main thread, and takes a later claimed SIGTERM silently (the pod
is ending already); a SIGTERM it does not claim goes on as if it were not there.
"""

from __future__ import annotations

from contextlib import ExitStack
from types import TracebackType
from typing import Self

from wharf.execution.signals import sigterm_hook


class SigtermClaim:
    """While entered, a SIGTERM that :meth:`_claims` raises :meth:`_error` in the main thread
    (once; :attr:`taken` then says so); one it does not claim goes to an older hook, the run
    loop's handler or Python's default. ``hooked``: False enters nothing (no SIGTERM is
    ever this context's)."""

    def __init__(self, *, hooked: bool = True) -> None:
        self.taken = False
        self._hooks = hooked
        self._hooked = ExitStack()

    def __enter__(self) -> Self:
        if self._hooks:
            self._hooked.enter_context(sigterm_hook(self._take))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._hooked.close()

    def _claims(self) -> bool:
        """Whether a SIGTERM now is this context's."""
        raise NotImplementedError

    def _error(self) -> BaseException:
        """What the first SIGTERM this context claims raises."""
        raise NotImplementedError

    def _take(self) -> bool:
        """The SIGTERM hook: whether the signal is this context's (raising the first time)."""
        if not self._claims():
            return False
        if not self.taken:
            self.taken = True
            raise self._error()
        return True
