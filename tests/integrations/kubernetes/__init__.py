"""Tests of the Kubernetes orchestrator and step operator: pure builders here, the rest on the
Kubernetes test bed (tests.kube: API emulator + process kubelet)."""
