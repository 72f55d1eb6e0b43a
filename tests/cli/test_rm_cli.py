# ruff: noqa: F811  (fixtures imported from the RM API conftest)
"""``wharf resource-manager | pool | policy | request``, run as real subprocesses against a real
RM server (and once against the embedded RM). Bad input: one line on stderr, exit 1, nothing
changed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.cli.test_cli import assert_one_line_error
from tests.resource_manager.api.conftest import (  # noqa: F401 (fixtures)
    _rm_sqlite_template,
    server,
    sqlite_rm_url,
)
from tests.resource_manager.api.live import ADMIN_KEY, ALICE_KEY, LiveServer, free_socket
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.contract.models import PolicyCreate, PoolCreate, ResourceRequestCreate
from wharf.resource_manager.embedded.machine import detect_machine

CPUS = {
    "name": "cpus",
    "rank": 1,
    "classes": [
        {
            "name": "small",
            "capacity": {"CPU": "16CPU", "memory": "64GiB"},
            "reclaimable": "coordinated",
        }
    ],
}
EVERYONE = {
    "name": "everyone",
    "pool": "cpus",
    "subject_selector": {"subject_type": "account"},
    "grants": [{"class": "small", "resources": {"CPU": {"reserved": "4CPU"}}}],
}


def run(
    *args: str, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        check=False,
        timeout=60,
    )


def ok(*args: str, env: dict[str, str]) -> str:
    result = run(*args, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def env(server: LiveServer, tmp_path: Path) -> dict[str, str]:
    values = {**os.environ, "WHARF_HOME": str(tmp_path / "home")}
    values.pop("WHARF_STORE_URL", None)
    values.update({"WHARF_RM_URL": server.url, "WHARF_RM_API_KEY": ADMIN_KEY})
    return values


@pytest.fixture
def rm(server: LiveServer) -> HttpResourceManager:
    return server.client()


def _request(project: str, gpus: int = 1) -> ResourceRequestCreate:
    return ResourceRequestCreate.model_validate(
        {
            "subjects": [{"nodes": [{"subject_type": "project", "subject_id": project}]}],
            "demands": [{"resource": "GPU", "quantity": gpus, "class": "h100"}],
            "lease_seconds": 600,
            "metadata": {"run": project},
        }
    )


def _setup(rm: HttpResourceManager, gpus: int) -> None:
    pool = {"name": "gpus", "classes": [{"name": "h100", "capacity": {"GPU": gpus}}]}
    rm.pools.create(PoolCreate.model_validate(pool))
    policy = {"name": "team", "pool": "gpus", "subject_selector": {"subject_type": "project"}}
    rm.policies.create(PolicyCreate.model_validate(policy))


def test_pools_and_policies(env: dict[str, str], rm: HttpResourceManager) -> None:
    """Creating, listing, showing, updating and deleting through a real RM server; the pool
    ``cpus`` and the policy ``everyone`` are made through the API (``create -f FILE`` is checked
    in test_pool_views.py and test_policy_file.py)."""
    rm.pools.create(PoolCreate.model_validate(CPUS))
    rm.policies.create(PolicyCreate.model_validate(EVERYONE))
    created = json.loads(
        ok(
            "pool",
            "create",
            "gpus",
            "--capacity",
            "gpu:h100=8",
            "--capacity",
            "cpu=64",
            "--capacity",
            "memory=512GiB",
            "--reclaimable",
            "h100=coordinated",
            "-o",
            "json",
            env=env,
        )
    )
    classes = {c["name"]: c for c in created["classes"]}
    assert classes["h100"]["capacity"] == {"GPU": 8}
    assert classes["h100"]["reclaimable"] == "coordinated"
    assert classes["default"]["capacity"] == {"CPU": 64_000, "memory": 512 * 1024**3}
    assert {p["name"] for p in json.loads(ok("pool", "list", "-o", "json", env=env))} == {
        "gpus",
        "cpus",
    }
    table = ok("pool", "show", "gpus", env=env)
    assert "512 GiB" in table and "coordinated" in table
    updated = json.loads(
        ok(
            "pool",
            "update",
            "gpus",
            "--capacity",
            "gpu:h100=4",
            "--rank",
            "2",
            "-o",
            "json",
            env=env,
        )
    )
    classes = {c["name"]: c for c in updated["classes"]}
    assert updated["rank"] == 2 and classes["h100"]["capacity"] == {"GPU": 4}
    assert classes["default"]["capacity"]["CPU"] == 64_000  # untouched

    policy = json.loads(
        ok(
            "policy",
            "create",
            "team",
            "--pool",
            "gpus",
            "--subject-type",
            "project",
            "--subject-id",
            "p1",
            "--reserved",
            "gpu:h100=2",
            "--limit",
            "gpu:h100=4",
            "--priority",
            "5",
            "-o",
            "json",
            env=env,
        )
    )
    grant = policy["grants"][0]
    assert grant["class_name"] == "h100" and grant["resources"]["GPU"]["reserved"] == 2
    listed = json.loads(ok("policy", "list", "--pool", "gpus", "-o", "json", env=env))
    assert [p["name"] for p in listed] == ["team"]
    assert "h100: GPU reserved 2 GPU limit 4 GPU" in ok("policy", "show", "team", env=env)
    assert "everyone" in ok("policy", "list", env=env)
    changed = json.loads(
        ok(
            "policy",
            "update",
            "team",
            "--priority",
            "9",
            "--reserved",
            "gpu:h100=3",
            "-o",
            "json",
            env=env,
        )
    )
    assert changed["priority"] == 9 and changed["grants"][0]["resources"]["GPU"]["reserved"] == 3
    assert changed["grants"][0]["resources"]["GPU"]["limit"] == 4  # kept
    ok("policy", "delete", "everyone", "--yes", env=env)
    ok("pool", "delete", "cpus", "--yes", env=env)
    assert [p.name for p in rm.pools.list()] == ["gpus"]


BAD_INPUT: list[tuple[tuple[str, ...], str]] = [
    (("pool", "create", "x", "-c", "cpu=8cores"), "Unknown unit 'cores'"),
    (("pool", "create", "x", "-c", "gpu:h100=-1"), "must not be negative"),
    (("pool", "create", "x", "-c", "gpu:h100=1.5"), "not a whole number"),
    (("pool", "create", "x", "-c", "tpu=1"), "Unknown resource 'tpu'"),
    (
        ("pool", "create", "x", "-c", "cpu=1", "-c", "CPU=2CPU"),
        "gives CPU of class 'default' twice",
    ),
    (("pool", "create", "x", "-c", "gpu"), "Expected RESOURCE[:CLASS]=QUANTITY"),
    (
        ("policy", "create", "y", "--pool", "gpus", "--selector", "{any: []}"),
        "'any' needs at least one selector",
    ),
    (("policy", "create", "y", "--pool", "gpus", "--selector", "[1"), "not valid YAML"),
    (  # the selector is whole: --subject-* beside it would be dropped unsaid
        (
            *("policy", "create", "y", "--pool", "gpus"),
            *("--selector", "{subject_type: account}", "--subject-type", "project"),
        ),
        "Give --selector or --subject-type/--subject-id/--subject-attribute, not both",
    ),
    (("policy", "create", "y", "--pool", "gpus", "--subject-type", "planet"), "subject_type"),
    (
        (
            "policy",
            "create",
            "y",
            "--pool",
            "gpus",
            "--subject-type",
            "project",
            "--reserved",
            "gpu:h100=9",
        ),
        "above its capacity",
    ),
    (
        (
            "policy",
            "create",
            "y",
            "--pool",
            "gpus",
            "--subject-type",
            "project",
            "--reserved",
            "gpu=1",
        ),
        "needs a class",
    ),
    (("pool", "create", "z", "--capacity", "gpu:=2"), "No class after ':' in 'gpu:'"),
    (("policy", "create", "z", "--pool", "gpus"), "--subject-type, --subject-id"),
    (("policy", "create", "z", "--subject-type", "project"), "A policy needs --pool"),
    (("pool", "delete", "gpus", "--yes"), "still has 1 live resource request"),
    (("policy", "delete", "team", "--yes"), "1 live resource request(s) allocated under it"),
    (("pool", "show", "nope"), "'nope' not found"),
    (("request", "show", "not-an-id"), "not a resource request id"),
    (("request", "list", "--metadata", "x"), "KEY=VALUE"),
]


def test_bad_input_is_one_line_and_changes_nothing(
    env: dict[str, str], rm: HttpResourceManager
) -> None:
    _setup(rm, gpus=8)
    rm.requests.create(_request("p1"))
    before = (rm.pools.list(), rm.policies.list(), rm.requests.list().total)
    for args, fragment in BAD_INPUT:
        assert_one_line_error(run(*args, env=env), fragment)
    assert (rm.pools.list(), rm.policies.list(), rm.requests.list().total) == before


BAD_FILES: list[tuple[str, str, str]] = [
    ("pool", "name: x\nclasses: nope\n", "Invalid pool: 'classes' must be a list (got 'nope')"),
    ("pool", "name: x\nclasses: [1]\n", "'classes[0]' must be a mapping"),
    ("pool", "name: x\nclasses: {name: c}\n", "'classes' must be a list"),
    (
        "pool",  # the second class silently replaced the first
        "name: x\nclasses: [{name: c, capacity: {GPU: 1}}, {name: c, capacity: {GPU: 5}}]\n",
        "'classes' names 'c' more than once",
    ),
    ("policy", "name: y\npool: gpus\nsubject_selector: {}\ngrants: nope\n", "'grants' must"),
    ("policy", "name: y\npool: gpus\nsubject_selector: {}\ngrants: [1]\n", "'grants[0]'"),
    (
        "policy",
        "name: y\npool: gpus\nsubject_selector: {subject_type: project}\n"
        "grants: [{class: h100}, {class: h100}]\n",
        "'grants' names 'h100' more than once",
    ),
]


def test_malformed_files_are_one_line_and_change_nothing(
    env: dict[str, str], rm: HttpResourceManager, tmp_path: Path
) -> None:
    """A file whose classes or grants are not a list of mappings with distinct names (it was
    an AttributeError traceback, or a duplicate silently dropped)."""
    _setup(rm, gpus=8)
    before = (rm.pools.list(), rm.policies.list())
    for index, (command, text, fragment) in enumerate(BAD_FILES):
        path = tmp_path / f"{index}.yaml"
        path.write_text(text)
        assert_one_line_error(run(command, "create", "-f", str(path), env=env), fragment)
    path = tmp_path / "update.yaml"
    path.write_text("classes: nope\n")
    assert_one_line_error(
        run("pool", "update", "gpus", "-f", str(path), "-c", "gpu:h100=2", env=env),
        "'classes' must be a list",
    )
    assert (rm.pools.list(), rm.policies.list()) == before


def test_requests(env: dict[str, str], rm: HttpResourceManager) -> None:
    _setup(rm, gpus=1)
    held = rm.requests.create(_request("p1"))
    waiting = rm.requests.create(_request("p2"))
    listed = json.loads(ok("request", "list", "--status", "allocated", "-o", "json", env=env))
    assert [r["id"] for r in listed] == [str(held.id)]
    by_meta = json.loads(ok("request", "list", "-m", "run=p2", "-o", "json", env=env))
    assert [r["id"] for r in by_meta] == [str(waiting.id)]
    assert str(held.id) in ok("request", "list", env=env)
    shown = ok("request", "show", str(held.id), env=env)
    assert "allocated" in shown and "h100" in shown
    queue = json.loads(ok("pool", "queue", "gpus", "-o", "json", env=env))
    assert [(e["position"], e["request"]["id"]) for e in queue] == [(1, str(waiting.id))]
    assert "position 1 of 1" in ok("request", "explain", str(waiting.id), env=env)
    assert "cancelled" in ok("request", "cancel", str(waiting.id), env=env)
    assert "released" in ok("request", "release", str(held.id), env=env)
    assert rm.requests.get(held.id).status.value == "released"
    # A finished request is left as it is, and said to be (it printed 'released.', exit 0,
    # as if this release had ended it)
    again = run("request", "release", str(waiting.id), env=env)
    assert_one_line_error(again, "was already finished (cancelled")
    assert rm.requests.get(waiting.id).status.value == "cancelled"


def test_credentials_are_checked(env: dict[str, str]) -> None:
    assert_one_line_error(
        run("pool", "list", env={**env, "WHARF_RM_API_KEY": ""}),
        "pass --api-key (or set WHARF_RM_API_KEY)",
    )
    assert_one_line_error(
        run("pool", "list", env={**env, "WHARF_RM_API_KEY": "wrong"}), "login failed"
    )
    alice = {**env, "WHARF_RM_API_KEY": ALICE_KEY}
    assert_one_line_error(
        run("pool", "create", "x", "-c", "gpu=1", env=alice), "Only an administrator"
    )


def test_embedded_mode_and_its_local_pool_from_the_first_command(tmp_path: Path) -> None:
    """No RM URL: the commands use the embedded RM in the home's database, where, though no
    pipeline has run yet, the pool ``local`` already describes this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WHARF_RM_", "WHARF_STORE"))}
    env.update({"WHARF_HOME": str(tmp_path / "home"), "WHARF_LOCAL_STEP_SLOTS": "3"})
    ok("pool", "create", "gpus", "-c", "gpu:a100=2", "-c", "cpu=8", env=env)
    pools = {p["name"]: p for p in json.loads(ok("pool", "list", "-o", "json", env=env))}
    assert sorted(pools) == ["gpus", "local"]
    assert (tmp_path / "home" / "wharf.db").exists()
    assert pools["local"]["concurrency_limit"] == 3
    default = next(c for c in pools["local"]["classes"] if c["name"] == "default")
    assert default["capacity"]["CPU"] == detect_machine().cpus * 1000
    policy = json.loads(ok("policy", "show", "local-default", "-o", "json", env=env))
    assert policy["subject_selector"]["subject_id"] == "default"  # the embedded store's user


def test_serve_with_credentials_and_two_workers(tmp_path: Path) -> None:
    """``credential`` names each credential's rights (``--asserts-subjects`` makes the workspace
    server's credential); ``serve`` takes them and its options."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WHARF_RM_", "WHARF_STORE"))}
    env["WHARF_HOME"] = str(tmp_path / "home")
    made = run("resource-manager", "credential", "ci", "--admin", env=env)
    assert made.returncode == 0, made.stderr
    key = made.stderr.strip().rsplit(" ", 1)[-1]
    assert key.startswith("wrm.ci.") and key not in made.stdout
    entry = yaml.safe_load(made.stdout)[0]
    assert (entry["name"], entry["admin"], entry["asserts_subjects"]) == ("ci", True, False)
    workspace = run("resource-manager", "credential", "ws", "--asserts-subjects", env=env)
    assert workspace.returncode == 0, workspace.stderr
    entry = yaml.safe_load(workspace.stdout)[0]
    assert (entry["name"], entry["admin"], entry["asserts_subjects"]) == ("ws", False, True)
    (tmp_path / "credentials.yaml").write_text(made.stdout + workspace.stdout)
    port = free_socket().getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wharf.cli.main",
            "resource-manager",
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
            "--log-level",
            "warning",
            "--credentials",
            str(tmp_path / "credentials.yaml"),
            "--db-url",
            f"sqlite:///{tmp_path / 'rm.db'}",
            "--metrics-public",
            "--max-body-bytes",
            "4096",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        client_env = {**env, "WHARF_RM_URL": url, "WHARF_RM_API_KEY": key}
        ok("pool", "create", "gpus", "-c", "gpu=2", env=client_env)
        with HttpResourceManager(url, api_key=key) as served:  # whichever worker answers
            assert "gpus" in [pool.name for pool in served.pools.list()]
        assert (tmp_path / "home" / "resource_manager" / "secret_key").exists()
        assert httpx.get(f"{url}/metrics", timeout=10).status_code == 200  # no token needed
        big = httpx.post(f"{url}/v1/auth/login", content=b"x" * 4097, timeout=10)
        assert big.status_code == 413  # --max-body-bytes
        try:  # a request head far over the bound is refused (400, or the connection dropped)
            huge = httpx.get(f"{url}/health", headers={"x-padding": "p" * 1_000_000}, timeout=10)
            assert huge.status_code == 400
        except httpx.TransportError:
            pass
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


def test_serve_refuses_to_start_without_credentials(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_RM_")}
    env["WHARF_HOME"] = str(tmp_path / "home")
    assert_one_line_error(run("resource-manager", "serve", env=env), "Nobody could log in")


def test_help_lists_the_rm_commands() -> None:
    result = run("--help", env=dict(os.environ))
    for group in ("resource-manager", "pool", "policy", "request"):
        assert group in result.stdout


def test_the_cli_defaults_for_serve_are_the_settings_own() -> None:
    from wharf.cli import resource_manager as cli
    from wharf.resource_manager.api.settings import ApiSettings

    fields = ApiSettings.model_fields
    assert fields["max_body_bytes"].default == cli.DEFAULT_MAX_BODY_BYTES
    assert fields["max_lease_seconds"].default == cli.DEFAULT_MAX_LEASE_SECONDS
