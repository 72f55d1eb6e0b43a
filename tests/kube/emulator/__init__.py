"""An emulator of the Kubernetes API subset Wharf uses, served over real HTTP on 127.0.0.1.

``Emulator`` ties the parts together: an ``ObjectStore`` (objects, resourceVersions, watches),
the controllers (Jobs, CronJobs, garbage collection, namespace finalisation), ``Faults`` (failed
or slow requests, dropped watches, forced 410s), ``Access`` (what the token's user may do) and
the HTTP server. The official ``kubernetes`` client talks to it through ``kubeconfig_path`` (written
on ``start()``: ``server: http://127.0.0.1:PORT`` and a bearer token)::

    with Emulator() as emu:
        cfg = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(str(emu.kubeconfig_path), client_configuration=cfg)

Time: with a ``FakeClock`` time moves only through ``advance_to(t)``, which runs the time-based
controllers (deadlines, TTLs, CronJob schedules) at once; with the default ``SystemClock`` a
daemon thread ticks them every 0.25 s. Pod logs are read from ``log_dir`` (``pod_log_path``),
where the process kubelet writes them. ``bookmark()`` makes open watches send a BOOKMARK;
``open_watches`` counts the watch streams being served. ``go_down()`` and ``come_back()`` make an
outage of the API (nothing listens between them). ``stop()`` ends every connection and removes
the emulator's temporary directory (unless ``workdir`` was given).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
from datetime import datetime
from pathlib import Path
from types import TracebackType

from tests.kube.emulator.access import Access
from tests.kube.emulator.clock import Clock, FakeClock, SystemClock
from tests.kube.emulator.controllers import Controllers
from tests.kube.emulator.faults import Faults
from tests.kube.emulator.http import ApiServer
from tests.kube.emulator.podlogs import log_path
from tests.kube.emulator.store import ObjectStore
from tests.kube.emulator.streams import WatchRegistry

__all__ = ["Emulator"]

log = logging.getLogger(__name__)

TICK_SECONDS = 0.25
CONTEXT_NAME = "wharf-emulator"


class Emulator:
    """One in-process Kubernetes API emulator (see the package docstring)."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        token: str = "wharf-test-token",
        workdir: Path | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self.token = token
        self.store = ObjectStore(self.clock)
        self.controllers = Controllers(self.store, self.clock)
        self.controllers.attach()
        self.faults = Faults(self.store)
        self.access = Access()
        self._owns_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="wharf-kube-emulator-"))
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.kubeconfig_path = self.workdir / "kubeconfig"
        self._watches = WatchRegistry()
        self._server = ApiServer(
            self.store, self.faults, self._watches, self.access, token=token, log_dir=self.log_dir
        )
        self.url = ""
        self._ticker_stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._started:
            return
        self.url = self._server.start()
        self._write_kubeconfig()
        if not isinstance(self.clock, FakeClock):
            self._ticker = threading.Thread(
                target=self._tick_forever, name="kube-emulator-ticker", daemon=True
            )
            self._ticker.start()
        self._started = True

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        self._ticker_stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        self._server.stop()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Emulator:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what tests drive ----------------------------------------------------------------------

    def go_down(self) -> None:
        """An outage: stop listening and cut every connection, watches included (clients then
        meet "connection refused"); the objects, controllers and clock go on."""
        self._server.stop()

    def come_back(self) -> None:
        """End an outage: listen again on the same address (the kubeconfig stays right)."""
        self._server.start(port=int(self.url.rsplit(":", 1)[1]))

    def advance_to(self, t: datetime) -> None:
        """Move the FakeClock to ``t`` and run the time-based controllers (FakeClock only)."""
        if not isinstance(self.clock, FakeClock):
            raise TypeError("advance_to needs an Emulator built with a FakeClock")
        self.clock.advance_to(t)
        self.controllers.tick(self.clock.now())

    def bookmark(self) -> None:
        """Have every open watch that allows bookmarks send a BOOKMARK event."""
        self._server.bookmark()

    @property
    def open_watches(self) -> int:
        """How many watch streams are being served right now (a client that stops watching
        is noticed within a fraction of a second)."""
        return len(self._watches.snapshot())

    def pod_log_path(self, namespace: str, name: str, container: str | None = None) -> Path:
        """Where ``/log`` reads: the pod's log directory, or one container's log file."""
        if container is None:
            return self.log_dir / namespace / name
        return log_path(self.log_dir, namespace, name, container, previous=False)

    # -- internals -----------------------------------------------------------------------------

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": CONTEXT_NAME, "cluster": {"server": self.url}}],
            "users": [{"name": CONTEXT_NAME, "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": CONTEXT_NAME,
                    "context": {
                        "cluster": CONTEXT_NAME,
                        "user": CONTEXT_NAME,
                        "namespace": "default",
                    },
                }
            ],
            "current-context": CONTEXT_NAME,
        }
        # JSON is YAML: every kubeconfig reader accepts it.
        self.kubeconfig_path.write_text(json.dumps(config, indent=2))

    def _tick_forever(self) -> None:
        while not self._ticker_stop.wait(TICK_SECONDS):
            try:
                self.controllers.tick(self.clock.now())
            except Exception:
                log.exception("emulator: controller tick failed")
