"""Step pods' logs, for the artifact store: read once an attempt ended, or followed to the end
when the attempt is being stopped (a deleted pod's log is gone with the pod).

Owns :class:`PodLogFollower` and :func:`collect_pod_logs`. Invariant: a log that cannot be had
is a line saying why, never an exception: the attempt's outcome does not depend on its log.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes.client import ApiException, CoreV1Api

logger = logging.getLogger(__name__)

MAIN_CONTAINER = "main"
FOLLOW_WAIT_SECONDS = 15.0
"""How long cleanup waits for a followed log to reach its end."""


class PodLogFollower:
    """Follows one pod's ``main`` container log (``follow=true``) in a daemon thread from the
    moment it is started until the container ends or :meth:`close` is called."""

    def __init__(self, core: CoreV1Api, namespace: str, pod: str) -> None:
        self._core = core
        self.namespace = namespace
        self.pod = pod
        self._chunks: list[bytes] = []
        self._error: str | None = None
        self._response: Any = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=f"log-{pod}", daemon=True)

    def start(self) -> PodLogFollower:
        self._thread.start()
        return self

    def result(self, timeout: float = FOLLOW_WAIT_SECONDS) -> bytes:
        """The log followed so far, once it ended or ``timeout`` passed (then cut short)."""
        if not self._done.wait(timeout):
            self.close()
        with self._lock:
            text = b"".join(self._chunks)
            error = self._error
        if error is not None and not text:
            return f"(no log of pod {self.pod}: {error})\n".encode()
        return text

    def close(self) -> None:
        with self._lock:
            response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:  # ended meanwhile
                logger.debug("closing the log stream of %s failed", self.pod, exc_info=True)

    def _follow(self) -> None:
        try:
            response: Any = self._core.read_namespaced_pod_log(
                self.pod,
                self.namespace,
                container=MAIN_CONTAINER,
                follow=True,
                _preload_content=False,
            )
            with self._lock:
                self._response = response
            try:
                for chunk in response.stream(amt=None, decode_content=False):
                    with self._lock:
                        self._chunks.append(bytes(chunk))
            finally:
                response.close()
        except ApiException as exc:
            with self._lock:
                self._error = f"{exc.status} {exc.reason}"
        except Exception as exc:  # the stream cut by close() or the server
            logger.debug("following the log of %s ended: %s", self.pod, exc)
        finally:
            self._done.set()


def read_pod_log(core: CoreV1Api, namespace: str, pod: str) -> bytes:
    """The whole log of the pod's main container, or a line saying why there is none."""
    try:
        response: Any = core.read_namespaced_pod_log(
            pod, namespace, container=MAIN_CONTAINER, _preload_content=False
        )
        return bytes(response.data)
    except ApiException as exc:
        return f"(no log of pod {pod}: {exc.status} {exc.reason})\n".encode()


def collect_pod_logs(
    core: CoreV1Api,
    namespace: str,
    pods: Sequence[str],
    followed: Mapping[str, PodLogFollower],
    lost: bool = False,
) -> bytes:
    """The logs of ``pods`` (oldest first) and of the ``followed`` ones, each pod's under a
    header line when there are several: what was followed and, for the others, one read
    each. A followed log is waited for to reach its end (:data:`FOLLOW_WAIT_SECONDS`), unless
    ``lost``: pods on a lost node never end theirs, what was followed so far is taken."""
    names = list(pods) + [name for name in followed if name not in pods]
    parts = []
    for name in names:
        follower = followed.get(name)
        if follower is not None:
            text = follower.result(0.0 if lost else FOLLOW_WAIT_SECONDS)
        else:
            text = read_pod_log(core, namespace, name)
        if len(names) > 1:
            text = f"--- pod {name} ---\n".encode() + text
        parts.append(text)
    return b"".join(parts)
