"""The process kubelet against the API emulator: pods run as local processes, as a kubelet would.

Every wait is on a condition seen through the API with a deadline (``kubelet_testing``).
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.kube.emulator import Emulator
from tests.kube.kubelet import Kubelet
from tests.kube.kubelet_env import expand_references, parse_quantity
from tests.kube.kubelet_process import lookup_image, resolve_images
from tests.kube.kubelet_testing import (
    PYTHON_IMAGE,
    Pod,
    container_state,
    phase_is,
    process_alive,
    python_pod,
    run_to_end,
    wait_for_output,
    wait_for_pod,
)

NODE = "wharf-test-node"
NS = "default"


@pytest.fixture
def process_kubelet(emulator: Emulator) -> Iterator[Kubelet]:
    with Kubelet(
        emulator.kubeconfig_path,
        node_name=NODE,
        images={PYTHON_IMAGE: sys.executable},
        log_dir=emulator.log_dir,
        image_pull_backoff=0.5,
        restart_backoff=0.05,
    ) as kubelet:
        assert kubelet.wait_ready(5)
        yield kubelet


def test_a_pod_runs_to_success_with_its_log_served(process_kubelet: Kubelet, core) -> None:
    pod = run_to_end(core, python_pod("hello", "print('hi')"))

    assert pod["spec"]["nodeName"] == NODE
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["status"]["podIP"] == "127.0.0.1"
    terminated = container_state(pod)["terminated"]
    assert terminated["exitCode"] == 0
    assert terminated["reason"] == "Completed"
    assert terminated["startedAt"] <= terminated["finishedAt"]
    assert core.read_namespaced_pod_log("hello", NS) == "hi\n"
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "False",
        "Ready": "False",
    }


def test_a_running_pod_reports_running_and_ready(process_kubelet: Kubelet, core) -> None:
    code = "import time; print('up', flush=True); time.sleep(30)"
    core.create_namespaced_pod(NS, python_pod("runner", code))

    pod = wait_for_pod(core, "runner", phase_is("Running"))

    assert pod is not None
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"] is True
    assert "startedAt" in status["state"]["running"]
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
    model = core.read_namespaced_pod("runner", NS)  # the client's models accept the status
    assert model.status.container_statuses[0].state.running is not None


def test_a_failing_command_fails_the_pod_with_its_exit_code(process_kubelet, core) -> None:
    pod = run_to_end(core, python_pod("failing", "import sys; print('oops'); sys.exit(3)"))

    assert pod["status"]["phase"] == "Failed"
    terminated = container_state(pod)["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert core.read_namespaced_pod_log("failing", NS) == "oops\n"


def test_the_process_sees_env_values_downward_api_and_resources(process_kubelet, core) -> None:
    secret_value = base64.b64encode(b"s3cret").decode()
    core.create_namespaced_secret(
        NS, {"metadata": {"name": "creds"}, "data": {"token": secret_value, "USER": secret_value}}
    )
    core.create_namespaced_config_map(
        NS, {"metadata": {"name": "settings"}, "data": {"level": "debug", "MODE": "fast"}}
    )
    env = [
        {"name": "GREETING", "value": "hello"},
        {"name": "MESSAGE", "value": "$(GREETING) world $$(GREETING) $(UNDEFINED)"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "level"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {
            "name": "MEM_MI",
            "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
        },
        {
            "name": "CPU_M",
            "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}},
        },
    ]
    env_from = [
        {"secretRef": {"name": "creds"}, "prefix": "S_"},
        {"configMapRef": {"name": "settings"}},
        {"configMapRef": {"name": "absent", "optional": True}},
    ]
    names = [v["name"] for v in env] + ["S_USER", "MODE", "HOSTNAME", "KUBECONFIG"]
    names += ["WHARF_KUBELET_LIMIT_CPU", "WHARF_KUBELET_LIMIT_MEMORY"]
    names += ["WHARF_KUBELET_LIMIT_NVIDIA_COM_GPU", "WHARF_KUBELET_REQUEST_CPU"]
    names += ["WHARF_KUBELET_REQUEST_MEMORY"]
    code = f"import json, os; print(json.dumps({{n: os.environ.get(n) for n in {names!r}}}))"
    resources = {
        "limits": {"cpu": "2", "memory": "256Mi", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "500m"},
    }
    pod = python_pod("env", code, env=env, envFrom=env_from, resources=resources)

    final = run_to_end(core, pod)

    seen = json.loads(core.read_namespaced_pod_log("env", NS))
    assert final["status"]["phase"] == "Succeeded"
    assert seen == {
        "GREETING": "hello",
        "MESSAGE": "hello world $(GREETING) $(UNDEFINED)",
        "TOKEN": "s3cret",
        "LEVEL": "debug",
        "POD_NAME": "env",
        "POD_NS": NS,
        "POD_UID": final["metadata"]["uid"],
        "APP": "wharf",
        "NODE": NODE,
        "POD_IP": "127.0.0.1",
        "MEM_MI": "256",
        "CPU_M": "500",
        "S_USER": "s3cret",
        "MODE": "fast",
        "HOSTNAME": "env",
        "KUBECONFIG": str(process_kubelet.kubeconfig),
        "WHARF_KUBELET_LIMIT_CPU": "2",
        "WHARF_KUBELET_LIMIT_MEMORY": "256Mi",
        "WHARF_KUBELET_LIMIT_NVIDIA_COM_GPU": "1",
        "WHARF_KUBELET_REQUEST_CPU": "500m",
        "WHARF_KUBELET_REQUEST_MEMORY": "256Mi",
    }


def test_the_image_python_comes_first_on_path(process_kubelet, core, tmp_path: Path) -> None:
    code = "import os, shutil, subprocess, sys; print(sys.executable); print(os.getcwd())"
    workdir = tmp_path / "work"
    pod = python_pod("path", code, workingDir=str(workdir))
    pod["spec"]["containers"][0]["command"] = ["sh", "-c", 'python -c "$0"', code]

    run_to_end(core, pod)

    executable, cwd = core.read_namespaced_pod_log("path", NS).splitlines()
    assert Path(executable).parent == Path(sys.executable).parent
    assert Path(cwd) == workdir


def waiting_message(pod: Pod | None) -> str:
    waiting = container_state(pod or {}).get("waiting") or {}
    if waiting.get("reason") != "CreateContainerConfigError":
        return ""
    assert (pod or {})["status"]["phase"] == "Pending"
    return str(waiting["message"])


def test_a_missing_secret_or_key_waits_until_it_exists(process_kubelet, core) -> None:
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "late", "key": "token"}}}]
    code = "import os; print(os.environ['TOKEN'])"
    core.create_namespaced_pod(NS, python_pod("late", code, env=env))

    wait_for_pod(core, "late", lambda pod: 'secret "late" not found' in waiting_message(pod))
    other = {"other": base64.b64encode(b"x").decode()}
    core.create_namespaced_secret(NS, {"metadata": {"name": "late"}, "data": other})
    missing_key = "couldn't find key token in Secret default/late"
    wait_for_pod(core, "late", lambda pod: missing_key in waiting_message(pod))
    token = {"token": base64.b64encode(b"finally").decode()}
    core.patch_namespaced_secret("late", NS, {"data": token})
    final = wait_for_pod(core, "late", phase_is("Succeeded", "Failed"))

    assert final is not None and final["status"]["phase"] == "Succeeded"
    assert core.read_namespaced_pod_log("late", NS) == "finally\n"


def test_an_unknown_image_is_never_run(process_kubelet, core) -> None:
    reasons: list[str] = []

    def backing_off(pod: Pod | None) -> bool:
        statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
        if statuses and "waiting" in statuses[0]["state"]:
            waiting = statuses[0]["state"]["waiting"]
            reasons.append(waiting["reason"])
            if waiting["reason"] == "ErrImagePull":
                assert "ghcr.io/nowhere/nothing:1" in waiting["message"]
        return bool(reasons) and reasons[-1] == "ImagePullBackOff"

    pod = python_pod("unknown", "print('never')", image="ghcr.io/nowhere/nothing:1")
    core.create_namespaced_pod(NS, pod)
    final = wait_for_pod(core, "unknown", backing_off)

    assert final is not None and final["status"]["phase"] == "Pending"
    assert "ErrImagePull" in reasons
    assert not process_kubelet.log_path(NS, "unknown", "main").exists()


def test_a_graceful_delete_sends_sigterm_and_the_pod_goes(process_kubelet, core) -> None:
    code = (
        "import signal, sys, time\n"
        "def bye(*_):\n    print('got SIGTERM', flush=True); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\nprint('ready', flush=True)\ntime.sleep(30)\n"
    )
    core.create_namespaced_pod(NS, python_pod("graceful", code))
    wait_for_output(core, "graceful", "ready")
    terminated: list[dict[str, Any]] = []

    def gone(pod: Pod | None) -> bool:
        if pod is not None and pod["status"].get("containerStatuses"):
            terminated.extend(
                [container_state(pod)["terminated"]] if "terminated" in container_state(pod) else []
            )
        return pod is None

    core.delete_namespaced_pod("graceful", NS, grace_period_seconds=10)
    wait_for_pod(core, "graceful", gone)

    assert "got SIGTERM" in process_kubelet.log_path(NS, "graceful", "main").read_text()
    assert terminated and terminated[-1]["exitCode"] == 0


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(process_kubelet, core) -> None:
    code = (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\ntime.sleep(30)\n"
    )
    core.create_namespaced_pod(NS, python_pod("stubborn", code))
    wait_for_output(core, "stubborn", "ready")
    exit_codes: list[int] = []

    def gone(pod: Pod | None) -> bool:
        if pod is not None and "terminated" in container_state(pod):
            exit_codes.append(container_state(pod)["terminated"]["exitCode"])
        return pod is None

    started = time.monotonic()
    core.delete_namespaced_pod("stubborn", NS, grace_period_seconds=1)
    wait_for_pod(core, "stubborn", gone)

    assert time.monotonic() - started >= 1.0
    assert exit_codes and set(exit_codes) == {137}


def test_a_pod_deleted_outright_has_its_process_killed(process_kubelet, core) -> None:
    code = "import os, time; print(os.getpid(), 'started', flush=True); time.sleep(30)"
    core.create_namespaced_pod(NS, python_pod("doomed", code))
    pid = int(wait_for_output(core, "doomed", "started").split()[0])

    core.delete_namespaced_pod("doomed", NS, grace_period_seconds=0)

    wait_for_pod(core, "doomed", lambda pod: pod is None)
    deadline = time.monotonic() + 5
    while process_alive(pid):
        assert time.monotonic() < deadline, "the process outlived its pod"
        time.sleep(0.02)


def test_on_failure_restarts_the_container_in_the_same_pod(process_kubelet, core, tmp_path) -> None:
    code = (
        "import pathlib, sys\nmark = pathlib.Path('tried')\n"
        "if not mark.exists():\n    mark.write_text('1'); print('first'); sys.exit(2)\n"
        "print('second')\n"
    )
    pod = python_pod("retry", code, workingDir=str(tmp_path))
    pod["spec"]["restartPolicy"] = "OnFailure"

    final = run_to_end(core, pod)

    status = final["status"]["containerStatuses"][0]
    assert final["status"]["phase"] == "Succeeded"
    assert status["restartCount"] == 1
    assert status["lastState"]["terminated"]["exitCode"] == 2
    assert core.read_namespaced_pod_log("retry", NS) == "second\n"
    assert core.read_namespaced_pod_log("retry", NS, previous=True) == "first\n"


def test_a_container_without_command_or_args_fails(process_kubelet, core) -> None:
    pod = python_pod("bare", "")
    del pod["spec"]["containers"][0]["command"]

    final = run_to_end(core, pod)

    assert final["status"]["phase"] == "Failed"
    assert "image entrypoint unknown" in container_state(final)["terminated"]["message"]


def test_init_containers_run_first(process_kubelet, core, tmp_path: Path) -> None:
    pod = python_pod("staged", "print(open('prepared').read())", workingDir=str(tmp_path))
    pod["spec"]["initContainers"] = [
        {
            "name": "prepare",
            "image": PYTHON_IMAGE,
            "workingDir": str(tmp_path),
            "command": ["python", "-c", "open('prepared', 'w').write('by init')"],
        }
    ]

    final = run_to_end(core, pod)

    assert final["status"]["phase"] == "Succeeded"
    assert final["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert core.read_namespaced_pod_log("staged", NS, container="main") == "by init\n"


def test_stop_kills_every_process_it_started(emulator: Emulator, core) -> None:
    kubelet = Kubelet(
        emulator.kubeconfig_path, images={PYTHON_IMAGE: sys.executable}, log_dir=emulator.log_dir
    )
    kubelet.start()
    try:
        code = "import os, time; print(os.getpid(), 'started', flush=True); time.sleep(30)"
        core.create_namespaced_pod(NS, python_pod("orphan", code))
        pid = int(wait_for_output(core, "orphan", "started").split()[0])
    finally:
        kubelet.stop()

    assert not process_alive(pid)


def test_the_command_line_kubelet_runs_pods_until_sigterm(
    emulator: Emulator, core, tmp_path
) -> None:
    command = [sys.executable, "-m", "tests.kube.kubelet", "--kubeconfig"]
    command += [str(emulator.kubeconfig_path), "--image", f"{PYTHON_IMAGE}={sys.executable}"]
    command += ["--log-dir", str(emulator.log_dir), "--namespace", NS]
    command += ["--env", "IMAGE_GREETING=from the image"]
    process = subprocess.Popen(command, cwd=Path(__file__).parents[2], stderr=subprocess.PIPE)
    try:
        code = "import os; print('from the cli,', os.environ['IMAGE_GREETING'])"
        pod = run_to_end(core, python_pod("cli", code), timeout=10)
        assert pod["status"]["phase"] == "Succeeded"
        assert core.read_namespaced_pod_log("cli", NS) == "from the cli, from the image\n"
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0, stderr.decode()


def test_status_writes_are_retried_through_server_errors(
    emulator: Emulator, process_kubelet, core
) -> None:
    emulator.faults.fail_next("patch", "pods/status", code=500, times=2)
    emulator.faults.fail_next("patch", "pods/status", code=429, times=1)

    pod = run_to_end(core, python_pod("bumpy", "print('made it')"))

    assert pod["status"]["phase"] == "Succeeded"
    assert container_state(pod)["terminated"]["exitCode"] == 0


def test_an_expired_watch_is_resumed_by_listing_again(emulator: Emulator, core) -> None:
    emulator.faults.fail_next("watch", "pods", code=410)
    with Kubelet(emulator.kubeconfig_path, images={PYTHON_IMAGE: sys.executable}) as kubelet:
        assert kubelet.wait_ready(5)
        pod = run_to_end(core, python_pod("after-expiry", "print('ok')"))
    assert pod["status"]["phase"] == "Succeeded"


def test_a_dropped_watch_stream_is_resumed(emulator: Emulator, process_kubelet, core) -> None:
    run_to_end(core, python_pod("before-drop", "print('ok')"))  # the watch is live

    assert emulator.faults.drop_watches() >= 1
    pod = run_to_end(core, python_pod("after-drop", "print('ok')"))

    assert pod["status"]["phase"] == "Succeeded"


def test_a_restarted_kubelet_fails_the_never_pods_it_lost(emulator: Emulator, core) -> None:
    images = {PYTHON_IMAGE: sys.executable}
    code = "import time; print('started', flush=True); time.sleep(30)"
    with Kubelet(emulator.kubeconfig_path, node_name=NODE, images=images, log_dir=emulator.log_dir):
        core.create_namespaced_pod(NS, python_pod("lost", code))
        wait_for_output(core, "lost", "started")

    with Kubelet(emulator.kubeconfig_path, node_name=NODE, images=images, log_dir=emulator.log_dir):
        final = wait_for_pod(core, "lost", phase_is("Failed"))

    assert final is not None
    terminated = container_state(final)["terminated"]
    assert terminated["exitCode"] == 137
    assert "restarted" in terminated["message"]


def test_restart_policy_always_restarts_a_container_that_exits(process_kubelet, core) -> None:
    pod = python_pod("looping", "print('tick')")
    pod["spec"]["restartPolicy"] = "Always"
    core.create_namespaced_pod(NS, pod)

    def restarted_twice(state: Pod | None) -> bool:
        statuses = (state or {}).get("status", {}).get("containerStatuses") or []
        return bool(statuses) and statuses[0]["restartCount"] >= 2

    looping = wait_for_pod(core, "looping", restarted_twice)

    assert looping is not None and looping["status"]["phase"] == "Running"
    assert looping["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 0


def test_a_finished_pod_is_deleted_promptly(process_kubelet, core) -> None:
    run_to_end(core, python_pod("done", "print('done')"))

    core.delete_namespaced_pod("done", NS)

    assert wait_for_pod(core, "done", lambda pod: pod is None) is None


def test_pods_bound_to_another_node_are_left_alone(process_kubelet, core) -> None:
    elsewhere = python_pod("elsewhere", "print('no')")
    elsewhere["spec"]["nodeName"] = "another-node"
    core.create_namespaced_pod(NS, elsewhere)

    run_to_end(core, python_pod("here", "print('yes')"))  # seen after "elsewhere", in order

    untouched = core.read_namespaced_pod("elsewhere", NS)
    assert untouched.status.phase == "Pending"
    assert not untouched.status.container_statuses
    assert not process_kubelet.log_path(NS, "elsewhere", "main").exists()


def test_a_container_above_its_memory_limit_is_oom_killed(process_kubelet, core) -> None:
    code = "import time; hog = b'x' * (256 * 1024 * 1024); time.sleep(30)"
    pod = python_pod("hog", code, resources={"limits": {"memory": "64Mi"}})

    final = run_to_end(core, pod)

    assert final["status"]["phase"] == "Failed"
    terminated = container_state(final)["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")


def test_an_image_may_name_a_venv_directory_and_a_tag_defaults_to_latest(tmp_path) -> None:
    venv = Path(sys.executable).parent.parent
    runtimes = resolve_images({"wharf/venv": str(venv)}, tmp_path)

    runtime = lookup_image(runtimes, "wharf/venv:latest")
    assert runtime is not None and runtime.python == venv / "bin" / "python"
    assert lookup_image(runtimes, "wharf/venv:2") is None
    shim = runtime.path_dirs[0] / "python"
    printed = subprocess.run(
        [shim, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True, check=True
    )
    assert Path(printed.stdout.strip()) == venv


def test_quantities_and_variable_references_follow_kubernetes() -> None:
    assert parse_quantity("500m") == Fraction(1, 2)
    assert parse_quantity("1Gi") == 1024**3
    assert parse_quantity("2k") == 2000
    assert parse_quantity("1e3") == 1000
    defined = {"A": "x"}
    assert expand_references("$(A)-$$(A)-$(B)-$$-$", defined) == "x-$(A)-$(B)-$-$"
