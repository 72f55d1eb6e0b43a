"""The Kubernetes API contract suite: the API semantics Wharf's orchestrator relies on.

Every test talks to an API server through the official client only (``CoreV1Api``,
``BatchV1Api``, ``kubernetes.watch.Watch``), through the ``target`` fixture of ``conftest.py``:
by default the emulator (``tests.kube.emulator``), or any API server whose kubeconfig
``WHARF_KUBE_CONTRACT_KUBECONFIG`` names — e.g. the Debian-built kube-apiserver 1.20 of
``scripts/kube-apiserver``, which is the truth the suite was written against. Tests marked
``emulator_only(reason)`` need what such a bare server lacks (a controller manager, a kubelet,
``batch/v1`` CronJobs) and are skipped against it, with the reason.

Run: ``.venv/bin/pytest tests/kube/contract -n 0 -q`` (emulator), or
``WHARF_KUBE_CONTRACT_KUBECONFIG=/path/to/kubeconfig .venv/bin/pytest tests/kube/contract -n 0``
(``scripts/kube-apiserver start DIR`` writes ``DIR/kubeconfig``; see ``conftest.py`` for the two
opt-in slow checks).
"""
