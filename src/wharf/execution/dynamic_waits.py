"""What a dynamic pipeline's step call waits for before its step starts.

Owns :class:`CalledSteps` (the future of each step call of a run, by invocation id: what an
``after=`` names, what an input given a submitted step's future takes), :class:`Waits` (the
futures a call waits for), :func:`when_ended` and :func:`pass_on`. Invariants: a ``submit``
(or ``map``) never waits in the function's thread: its step is queued by the thread that ended
the last step it waits for (by the function's own only if all had ended already), so the
function goes on making calls, whose ids and order are given when they are made; a callable
run this way never raises (what it raises would be logged and lost); a step one of those it
waits for did not succeed never starts (:meth:`Waits.not_succeeded`), as in a static
pipeline, whatever the run's execution mode.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from wharf.core.errors import RunStoppedError, StepExecutionError, StepInterfaceError
from wharf.core.type_checks import check_input_annotation
from wharf.execution.dynamic_arguments import as_sequence, check_artifact
from wharf.execution.dynamic_futures import MapResultsFuture, OutputArtifact, StepFuture
from wharf.execution.dynamic_ids import StepIds
from wharf.execution.dynamic_outcome import (
    StepHaltedError,
    StepStoppedByFailureError,
    UpstreamNotSucceededError,
)
from wharf.execution.step_like import StepLike
from wharf.store.models import ArtifactVersionRecord


@dataclass(frozen=True)
class PendingInput:
    """An input of a submitted step that takes the output of a step not known to have ended."""

    step: str
    output: str
    future: Future[Any]


@dataclass(frozen=True)
class Waits:
    """The steps a call waits for: ``after``, upstream id -> its future; ``inputs``, input name
    -> the output it takes (its version is known once that step ended)."""

    after: dict[str, Future[Any]] = field(default_factory=dict)
    inputs: dict[str, PendingInput] = field(default_factory=dict)

    def futures(self) -> list[Future[Any]]:
        return [p.future for p in self.inputs.values()] + list(self.after.values())

    def versions(self, step: StepLike, step_id: str) -> dict[str, ArtifactVersionRecord]:
        """The versions of the inputs step ``step_id`` waited for, each of a step that
        succeeded (:meth:`not_succeeded` said so); a stored value that cannot fit its input is
        refused (:func:`~wharf.execution.dynamic_arguments.check_artifact`)."""
        versions: dict[str, ArtifactVersionRecord] = {}
        for name, pending in self.inputs.items():
            artifact = pending.future.result(0)
            assert isinstance(artifact, OutputArtifact)  # its step has one output
            check_artifact(step, step_id, name, artifact)
            versions[name] = artifact.version
        return versions

    def not_succeeded(self, step_id: str) -> UpstreamNotSucceededError | None:
        """Why step ``step_id`` does not start, once what it waits for ended: the first step
        it takes an output of, or runs after, that did not succeed (None: each did)."""
        for name, pending in self.inputs.items():
            what = _how_it_ended(pending.future)
            if what is not None:
                return UpstreamNotSucceededError(
                    f"Step '{step_id}' was not started: its input '{name}' is output "
                    f"'{pending.output}' of step '{pending.step}', which {what}."
                )
        for upstream, future in self.after.items():
            what = _how_it_ended(future)
            if what is not None:
                return UpstreamNotSucceededError(
                    f"Step '{step_id}' was not started: it runs after step '{upstream}', "
                    f"which {what}."
                )
        return None

    def cancelled(self) -> bool:
        """Whether a step it waits for was given up on (a forced stop): it never starts."""
        return any(f.cancelled() for f in self.futures())


class CalledSteps:
    """The step calls of one dynamic run: each one's future from its call on (done once a
    called step returned), and each submitted one's step."""

    def __init__(self, ids: StepIds) -> None:
        self._ids = ids
        self._lock = threading.Lock()
        self._futures: dict[str, Future[Any]] = {}
        self._steps: dict[str, StepLike] = {}

    def called(self, step_id: str, future: Future[Any], step: StepLike | None = None) -> None:
        """Step ``step_id`` was called (``step``: submitted), ending with ``future``."""
        with self._lock:
            self._futures[step_id] = future
            if step is not None:
                self._steps[step_id] = step

    def after(self, step_id: str, after: Any) -> dict[str, Future[Any] | None]:
        """The steps that step ``step_id``'s ``after=`` names (ids of steps this run called,
        their futures or outputs), each with the future it waits for (None: an output, of a
        step that ended)."""
        named: dict[str, Future[Any] | None] = {}
        for item in as_sequence(after):
            if isinstance(item, str):
                self._ids.check_after(step_id, item)  # a misspelt id: with those it may mean
                with self._lock:
                    future = self._futures.get(item)
                if future is None:  # its call was refused before it started
                    raise StepInterfaceError(
                        f"Step '{step_id}' runs after step '{item}', which was not started "
                        "(its call failed)."
                    )
                named[item] = future
            elif isinstance(item, StepFuture | MapResultsFuture):
                for handle in [item] if isinstance(item, StepFuture) else list(item):
                    named[handle.invocation_id] = handle.future
            elif isinstance(item, OutputArtifact):
                named.setdefault(item.step_name, None)
            else:
                raise StepInterfaceError(
                    f"Step '{step_id}' got after={item!r}; after= takes the ids of steps this "
                    "run called (a str or a list of them), their futures or their outputs."
                )
        return named

    def future_input(
        self, step: StepLike, step_id: str, name: str, value: Any
    ) -> PendingInput | None:
        """Input ``name`` of a step call, given the future of a step this run submitted with
        one output: the output it waits for (its annotation must be able to fit the input's,
        as in a static pipeline). A step with no outputs is refused (it gives no value:
        ``after=`` orders steps). None for any other value: read at the call."""
        if not isinstance(value, StepFuture):
            return None
        with self._lock:
            ours = self._futures.get(value.invocation_id) is value.future
            upstream = self._steps.get(value.invocation_id)
        if not ours or upstream is None:
            return None  # of another run: refused
        if not upstream.interface.outputs:
            raise StepInterfaceError(
                f"Input '{name}' of step '{step_id}' got the future of step "
                f"'{value.invocation_id}', which has no outputs; pass it as after= to run "
                "after that step."
            )
        if len(upstream.interface.outputs) > 1:
            raise StepInterfaceError(
                f"Input '{name}' of step '{step_id}' got several outputs at once; pass one of them."
            )
        output = upstream.interface.outputs[0]
        check_input_annotation(
            step_id,
            name,
            step.interface.inputs[name].annotation,
            output.annotation,
            f"output '{output.name}' of step '{value.invocation_id}'",
        )
        return PendingInput(value.invocation_id, output.name, value.future)


def _how_it_ended(future: Future[Any]) -> str | None:
    """How the step of ``future`` (done, not cancelled) ended if it did not succeed, as the
    end of a sentence ("failed"); None if it did."""
    if future.cancelled():
        return None  # given up on (a forced stop): the waiting step is cancelled instead
    error = future.exception(0)
    if error is None:
        return None
    if isinstance(error, RunStoppedError | StepStoppedByFailureError):
        return "was stopped"
    if isinstance(error, StepHaltedError):
        return "was not started"
    if isinstance(error, StepExecutionError):
        return "failed"
    return "was not started"  # its call was refused once it could start (its input's value)


def when_ended(futures: list[Future[Any]], then: Callable[[], None]) -> None:
    """Call ``then`` once every future of ``futures`` is done: here and now if they all are,
    else in the thread that ends the last of them."""
    left = len(futures)
    lock = threading.Lock()

    def one_ended(_: Future[Any]) -> None:
        nonlocal left
        with lock:
            left -= 1
            last = left == 0
        if last:
            then()

    if not futures:
        then()
    for future in futures:
        future.add_done_callback(one_ended)  # at once, in this thread, if it is done


def pass_on(source: Future[Any], target: Future[Any]) -> None:
    """End ``target`` as ``source`` ended (a done future): cancelled, raised or returned."""
    if source.cancelled():
        target.cancel()
        return
    error = source.exception()
    if error is not None:
        target.set_exception(error)
    else:
        target.set_result(source.result())


__all__ = ["CalledSteps", "PendingInput", "Waits", "pass_on", "when_ended"]
