"""Entry point of a step pod (``python -m`` this module ``ID NAMESPACE``): the engine's step
process (``wharf.execution.entrypoint.run_step_process``) that keeps its own log when its pod is
deleted.

A step's log reaches the artifact store through its orchestrator, which reads the pod's log once
the attempt ended, or follows it while the pod is deleted (``step_backend_logs``). A SIGTERM
means the pod is being deleted (its Job deleted from outside, a forced stop, an eviction): its log
goes with it once the container ended, and an orchestrator that is gone (killed, its Job failed)
cannot copy it then, nor can the pod that takes its run over; nor does anyone copy it when the
step stopped itself because its run ended (its orchestrator lost). Owns :class:`FinalLog`: on the
first SIGTERM a helper thread reads this pod's log through the API and stores it at the step
run's ``logs_uri`` unless something is there already (through a short outage of the artifact
store, as the run's other writes to it), for at most :data:`KEEP_SECONDS`, then the
signal ends the process as by default; at the step's end it does so if the run has ended. An
orchestrator that is alive copies the whole log at its cleanup, after this (it overwrites it).

Invariants: nothing is done in the signal handler but starting and awaiting that thread; a log
that cannot be kept is a warning, never another failure (the pod reads the API with its service
account: that of the orchestrator unless ``step_pod_service_account_name`` says otherwise, which
then needs ``get`` on ``pods/log``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar
from uuid import UUID

from wharf.artifacts.fsspec_store import store_unreachable
from wharf.config.global_config import load_config
from wharf.config.library_logs import quiet_library_loggers
from wharf.execution.components import instantiate_component
from wharf.execution.entrypoint import read_step, run_step_process
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.log_capture import write_log
from wharf.execution.outages import retry_through_outage
from wharf.execution.services import open_store, utc_now
from wharf.execution.signals import sigterm_hook

logger = logging.getLogger("wharf.step")
T = TypeVar("T")

STEP_MODULE = "wharf.integrations.kubernetes.step_main"
KEEP_SECONDS = 20.0
"""How long a SIGTERM waits for the log to be kept (within a pod's default grace period, 30 s)."""
READ_PATIENCE_SECONDS = 5.0
"""How long keeping the log waits through a store outage to read the step run."""


class FinalLog:
    """What this pod keeps of its log when it gets SIGTERM (see the module)."""

    def __init__(self, step_run_id: UUID, namespace: str, pod: str) -> None:
        self._step_run_id = step_run_id
        self._namespace = namespace
        self._pod = pod
        self.taken = False

    def take_sigterm(self) -> bool:
        """The SIGTERM hook: keep the log (the first time), then let the signal end the
        process as it would have (False: not taken)."""
        if not self.taken and self._pod and self._namespace:
            self.taken = True
            keeper = threading.Thread(target=self.keep, name="wharf-final-log", daemon=True)
            keeper.start()
            keeper.join(KEEP_SECONDS)
        return False

    def keep_if_run_ended(self) -> None:
        """At the step's end: keep the log if the step's run ended meanwhile (its orchestrator
        lost, or stopped): no orchestrator copies it then."""
        if self._pod and self._namespace and not self.taken:
            self.keep(only_if_run_ended=True)

    def keep(self, *, only_if_run_ended: bool = False) -> None:
        """Store this pod's log at its step run's ``logs_uri`` unless one is there, through an
        outage of the artifact store as short as the run's liveness timeout (cut short by the
        end of a SIGTERM's :data:`KEEP_SECONDS`; a write is whole or absent)."""
        try:
            config = load_config()
            store = open_store(config)
            try:
                if only_if_run_ended:  # two reads at a step's end: most runs go on
                    run_id = store.steps.get(self._step_run_id).run_id
                    if not store.runs.get_status(run_id).is_finished:
                        return
                start = read_step(store, self._step_run_id, READ_PATIENCE_SECONDS)
            finally:
                store.close()
            uri = start.record.logs_uri
            if not uri:
                return
            artifacts = instantiate_component(start.artifact_store)

            def through_outage(call: Callable[[], T], what: str) -> T:
                return retry_through_outage(
                    call,
                    what=what,
                    patience=liveness_timeout_for(config.heartbeat_interval),
                    clock=utc_now,
                    sleep=time.sleep,
                    is_transient=store_unreachable,
                )

            if through_outage(lambda: artifacts.exists(uri), "see whether the step's log is kept"):
                return
            # Imported here, when a log is to be kept: the Kubernetes client takes most of a
            # step pod's start-up imports (about 0.7 s of CPU), and most steps never need it.
            from wharf.integrations.kubernetes.clients import kube_clients
            from wharf.integrations.kubernetes.step_backend_logs import read_pod_log

            clients = kube_clients()
            try:
                text = read_pod_log(clients.core, self._namespace, self._pod)
            finally:
                clients.close()

            def keep_unless_there() -> None:  # its orchestrator may have stored it meanwhile
                if not artifacts.exists(uri):
                    write_log(artifacts, uri, text)

            if text.strip():
                through_outage(keep_unless_there, "keep the step's log")
        except Exception as exc:  # the step's end is its orchestrator's to record anyway
            logger.warning("The step's log could not be kept as its pod was deleted: %s", exc)


def main(argv: Sequence[str] | None = None) -> int:
    """The step pod's command line (``ID NAMESPACE``); exit codes as the engine's entry
    point's (``wharf.execution.entrypoint.main``)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    quiet_library_loggers()  # the step's log holds what it printed, not each HTTP request
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print(f"usage: python -m {STEP_MODULE} STEP_RUN_ID NAMESPACE", file=sys.stderr)
        return 2
    try:
        step_run_id = UUID(args[0])
        final = FinalLog(step_run_id, args[1], os.environ.get("HOSTNAME", ""))
        with sigterm_hook(final.take_sigterm):
            code = run_step_process(step_run_id)
        final.keep_if_run_ended()
        return code
    except Exception as exc:  # recorded by the orchestrator as "exited before reporting"
        logger.error("The step process failed before running the step: %s", exc)
        return 3


if __name__ == "__main__":
    sys.exit(main())
