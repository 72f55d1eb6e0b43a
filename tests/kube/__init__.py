"""The Kubernetes test bed: an API emulator, a process kubelet and an API contract suite.

The emulator (``tests.kube.emulator``) is a real HTTP server the official Python client talks to
through a kubeconfig; the process kubelet (``tests.kube.kubelet``) runs each pod's container as a
local process, against the emulator or a real kube-apiserver; the contract suite
(``tests/kube/contract``) checks the API semantics the orchestrator relies on against the emulator
in every run and against any API server named by ``WHARF_KUBE_CONTRACT_KUBECONFIG``.
"""
