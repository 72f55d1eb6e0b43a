"""The emulator's HTTP layer, through the official ``kubernetes`` client only.

Discovery and health, bearer-token authentication, CRUD round trips for every served resource,
real-shaped ``Status`` errors, pod binding and pod logs (plain, tailed and followed), the
facade's lifecycle. List/watch are in ``test_http_watch``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.kube.conftest import api_client_for
from tests.kube.emulator import Emulator
from tests.kube.emulator.clock import FakeClock
from tests.kube.http_testing import (
    IMAGE,
    NS,
    bind,
    failure,
    pod_body,
    raw_get,
    start_container,
    write_log,
)
from tests.waiting import wait_for

# ---------------------------------------------------------------------------------- discovery


def test_discovery_names_what_the_emulator_serves(kube_client: client.ApiClient) -> None:
    version = client.VersionApi(kube_client).get_code()
    assert version.git_version == "v1.30.0-wharf-emulator"
    assert (version.major, version.minor) == ("1", "30")
    assert client.CoreApi(kube_client).get_api_versions().versions == ["v1"]
    groups = {g.name: g for g in client.ApisApi(kube_client).get_api_versions().groups}
    assert sorted(groups) == ["authorization.k8s.io", "batch"]
    assert groups["batch"].preferred_version.group_version == "batch/v1"

    core = {r.name: r for r in client.CoreV1Api(kube_client).get_api_resources().resources}
    for name in ("namespaces", "pods", "secrets", "configmaps", "serviceaccounts", "events"):
        assert "watch" in core[name].verbs
    assert core["pods"].namespaced and not core["namespaces"].namespaced
    assert core["pods/status"].verbs == ["get", "patch", "update"]
    assert core["pods/log"].verbs == ["get"]
    assert core["pods/binding"].verbs == ["create"]
    assert core["namespaces/finalize"].verbs == ["update"]
    batch = {r.name: r for r in client.BatchV1Api(kube_client).get_api_resources().resources}
    assert {"jobs", "jobs/status", "cronjobs", "cronjobs/status"} <= set(batch)
    assert batch["cronjobs"].kind == "CronJob" and batch["cronjobs"].short_names == ["cj"]


def test_health_endpoints_answer_ok(kube_client: client.ApiClient) -> None:
    for path in ("/healthz", "/readyz", "/livez"):
        assert raw_get(kube_client, path) == (200, b"ok")


# ------------------------------------------------------------------------------ authentication


def client_with_token(emulator: Emulator, token: str | None) -> client.ApiClient:
    configuration = client.Configuration(host=emulator.url)
    if token is not None:
        configuration.api_key = {"BearerToken": token}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(configuration)


def test_a_wrong_token_gets_401_everywhere(emulator: Emulator) -> None:
    with client_with_token(emulator, "wrong-token") as api:
        for call in (client.VersionApi(api).get_code, client.CoreV1Api(api).list_namespace):
            status, body = failure(call)
            assert status == 401
            assert (body["kind"], body["reason"], body["code"]) == ("Status", "Unauthorized", 401)


def test_no_token_is_the_anonymous_user_who_reads_only_public_info(emulator: Emulator) -> None:
    with client_with_token(emulator, None) as api:
        assert client.VersionApi(api).get_code().major == "1"
        assert raw_get(api, "/healthz") == (200, b"ok")
        status, body = failure(client.BatchV1Api(api).read_namespaced_job, "j", NS)
        assert (status, body["reason"]) == (403, "Forbidden")
        assert body["message"] == (
            'jobs.batch "j" is forbidden: User "system:anonymous" cannot get resource "jobs" '
            'in API group "batch" in the namespace "default"'
        )
        assert body["details"] == {"name": "j", "group": "batch", "kind": "jobs"}
        status, body = failure(client.CoreV1Api(api).list_namespace)
        assert status == 403 and body["message"].endswith("at the cluster scope")
        status, body = failure(client.CoreV1Api(api).get_api_resources)
        assert body["message"] == 'forbidden: User "system:anonymous" cannot get path "/api/v1/"'
        status, body = failure(review, api, "get", "pods")
        assert (status, body["reason"]) == (403, "Forbidden")


def review(api: client.ApiClient, verb: str, resource: str, subresource: str = "") -> Any:
    attributes = client.V1ResourceAttributes(
        namespace=NS, verb=verb, resource=resource, subresource=subresource or None
    )
    spec = client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes)
    return client.AuthorizationV1Api(api).create_self_subject_access_review(
        client.V1SelfSubjectAccessReview(spec=spec)
    )


def test_access_reviews_and_requests_agree_on_what_is_denied(
    emulator: Emulator, kube_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    assert review(kube_client, "create", "pods").status.allowed
    emulator.access.deny("get", "pods/log")
    emulator.access.deny("create", "configmaps")
    denied = review(kube_client, "get", "pods", "log")
    assert denied.status.allowed is False
    assert review(kube_client, "get", "pods").status.allowed
    status, body = failure(core.create_namespaced_config_map, NS, {"metadata": {"name": "c"}})
    assert (status, body["reason"], body["details"]) == (403, "Forbidden", {"kind": "configmaps"})
    assert body["message"] == (
        'configmaps is forbidden: User "wharf-test" cannot create resource "configmaps" '
        'in API group "" in the namespace "default"'
    )
    emulator.access.reset()
    assert core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}}).metadata.name == "c"
    resources = client.AuthorizationV1Api(kube_client).get_api_resources().resources
    assert [(r.name, r.verbs) for r in resources] == [("selfsubjectaccessreviews", ["create"])]


# ----------------------------------------------------------------------------------- CRUD


@dataclass(frozen=True)
class Kind:
    """How the client addresses one resource: method suffix, API class and a valid body."""

    suffix: str
    api: str
    body: Callable[[str], dict[str, Any]]
    namespaced: bool = True


def _job_template() -> dict[str, Any]:
    return {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": IMAGE}]}}


KINDS = [
    Kind("pod", "CoreV1Api", pod_body),
    Kind("secret", "CoreV1Api", lambda n: {"metadata": {"name": n}, "data": {"k": "dg=="}}),
    Kind("config_map", "CoreV1Api", lambda n: {"metadata": {"name": n}, "data": {"k": "v"}}),
    Kind("service_account", "CoreV1Api", lambda n: {"metadata": {"name": n}}),
    Kind(
        "event",
        "CoreV1Api",
        lambda n: {
            "metadata": {"name": n},
            "involvedObject": {"kind": "Pod", "name": "x", "namespace": NS},
            "reason": "Tested",
            "message": "hello",
        },
    ),
    Kind(
        "job",
        "BatchV1Api",
        lambda n: {"metadata": {"name": n}, "spec": {"template": _job_template()}},
    ),
    Kind(
        "cron_job",
        "BatchV1Api",
        lambda n: {
            "metadata": {"name": n},
            "spec": {
                "schedule": "*/5 * * * *",
                "jobTemplate": {"spec": {"template": _job_template()}},
            },
        },
    ),
    Kind("namespace", "CoreV1Api", lambda n: {"metadata": {"name": n}}, namespaced=False),
]


@pytest.mark.parametrize("kind", KINDS, ids=[k.suffix for k in KINDS])
def test_crud_round_trip(kube_client: client.ApiClient, kind: Kind) -> None:
    api = getattr(client, kind.api)(kube_client)
    infix = "namespaced_" if kind.namespaced else ""
    ns_args: tuple[str, ...] = (NS,) if kind.namespaced else ()

    def call(verb: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(api, f"{verb}_{infix}{kind.suffix}")(*args, **kwargs)

    created = call("create", *ns_args, kind.body("round-trip"))
    meta = created.metadata
    assert meta.uid and meta.resource_version and meta.creation_timestamp
    assert meta.namespace == (NS if kind.namespaced else None)
    assert call("read", "round-trip", *ns_args).metadata.uid == meta.uid
    listed = call("list", *ns_args)
    assert "round-trip" in [item.metadata.name for item in listed.items]
    assert int(listed.metadata.resource_version) >= int(meta.resource_version)

    patched = call("patch", "round-trip", *ns_args, {"metadata": {"labels": {"patched": "yes"}}})
    assert patched.metadata.labels["patched"] == "yes"
    assert int(patched.metadata.resource_version) > int(meta.resource_version)

    current = call("read", "round-trip", *ns_args)
    current.metadata.labels = {"replaced": "yes"}
    replaced = call("replace", "round-trip", *ns_args, current)
    assert replaced.metadata.labels["replaced"] == "yes"
    assert "patched" not in replaced.metadata.labels

    call("delete", "round-trip", *ns_args)

    def gone() -> bool:
        try:
            call("read", "round-trip", *ns_args)
        except ApiException as error:
            return error.status == 404
        return False

    wait_for(gone, "the object to be gone")


def test_generate_name_and_namespace_from_the_url(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map(NS, {"metadata": {"generateName": "cm-"}})
    assert created.metadata.name.startswith("cm-") and len(created.metadata.name) == 8
    assert created.metadata.namespace == NS


def test_status_subresource_and_dry_run(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("p"))
    patched = core.patch_namespaced_pod("p", NS, {"status": {"phase": "Running"}})
    assert patched.status.phase == "Pending"  # status changes only through /status
    status = core.patch_namespaced_pod_status("p", NS, {"status": {"phase": "Running"}})
    assert status.status.phase == "Running"
    core.create_namespaced_pod(NS, pod_body("dry"), dry_run="All")
    assert failure(core.read_namespaced_pod, "dry", NS)[0] == 404
    core.delete_namespaced_pod("p", NS, dry_run="All")
    assert core.read_namespaced_pod("p", NS).metadata.name == "p"


def test_graceful_pod_deletion_with_grace_in_the_query_or_the_body(core: client.CoreV1Api) -> None:
    for name in ("a", "b"):
        core.create_namespaced_pod(NS, pod_body(name))
        bind(core, name)
        start_container(core, name)
    kept = core.delete_namespaced_pod("a", NS, grace_period_seconds=5)
    assert kept.metadata.deletion_timestamp is not None
    assert kept.metadata.deletion_grace_period_seconds == 5
    core.delete_namespaced_pod("a", NS, grace_period_seconds=0)
    assert failure(core.read_namespaced_pod, "a", NS)[0] == 404

    core.delete_namespaced_pod("b", NS, body=client.V1DeleteOptions(grace_period_seconds=7))
    assert core.read_namespaced_pod("b", NS).metadata.deletion_grace_period_seconds == 7
    core.delete_namespaced_pod("b", NS, body=client.V1DeleteOptions(grace_period_seconds=0))
    assert failure(core.read_namespaced_pod, "b", NS)[0] == 404


def test_namespace_finalize_subresource(core: client.CoreV1Api) -> None:
    created = core.create_namespace({"metadata": {"name": "fin"}})
    assert created.spec.finalizers == ["kubernetes"]
    created.spec.finalizers = []
    finalized = core.replace_namespace_finalize("fin", created)
    assert finalized.spec.finalizers in (None, [])
    assert core.read_namespace("fin").status.phase == "Active"


def test_delete_options_in_the_body_and_collection_delete(core: client.CoreV1Api) -> None:
    for name, app in (("a", "x"), ("b", "x"), ("c", "y")):
        core.create_namespaced_config_map(NS, {"metadata": {"name": name, "labels": {"app": app}}})
    uid = core.read_namespaced_config_map("a", NS).metadata.uid
    stale = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-" + uid))
    status, body = failure(core.delete_namespaced_config_map, "a", NS, body=stale)
    assert status == 409 and body["reason"] == "Conflict"

    core.delete_collection_namespaced_config_map(NS, label_selector="app=x")
    remaining = core.list_namespaced_config_map(NS).items
    assert [cm.metadata.name for cm in remaining if cm.metadata.name in "abc"] == ["c"]


# ------------------------------------------------------------------------------------ errors


def test_errors_are_real_shaped_status_bodies(core: client.CoreV1Api) -> None:
    status, body = failure(core.read_namespaced_pod, "missing", NS)
    assert status == 404
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "missing" not found',
        "reason": "NotFound",
        "details": {"name": "missing", "kind": "pods"},
        "code": 404,
    }
    core.create_namespaced_pod(NS, pod_body("p"))
    status, body = failure(core.create_namespaced_pod, NS, pod_body("p"))
    assert (status, body["reason"], body["message"]) == (
        409,
        "AlreadyExists",
        'pods "p" already exists',
    )

    stale = core.read_namespaced_pod("p", NS)
    core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"v": "2"}}})
    status, body = failure(core.replace_namespaced_pod, "p", NS, stale)
    assert (status, body["reason"]) == (409, "Conflict")

    status, body = failure(core.create_namespaced_pod, NS, pod_body("Not_Valid"))
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"

    status, body = failure(core.read_namespaced_pod, "p", "no-such-namespace")
    assert status == 404 and body["kind"] == "Status"


def test_unknown_paths_and_verbs_get_status_bodies(kube_client: client.ApiClient) -> None:
    for path, code, reason in (
        ("/api/v1/widgets", 404, "NotFound"),
        ("/nothing/here", 404, "NotFound"),
        ("/apis/apps/v1", 404, "NotFound"),
        ("/api/v1/namespaces/default/pods/p/exec", 404, "NotFound"),
    ):
        status, data = raw_get(kube_client, path)
        body = json.loads(data)
        assert (status, body["kind"], body["reason"], body["code"]) == (
            code,
            "Status",
            reason,
            code,
        )
    for verb, path in (
        ("PUT", "/api/v1/namespaces/default/pods"),
        ("GET", "/api/v1/namespaces/default/pods/p/binding"),
        ("PUT", "/api/v1/namespaces/default/pods/p/log"),
        ("DELETE", "/api/v1/namespaces/default/pods/p/status"),
        ("GET", "/api/v1/namespaces/default/bindings"),
        ("DELETE", "/api/v1/namespaces"),
        ("POST", "/api/v1/namespaces/default/configmaps/c"),
    ):
        method, url, headers, body_, _ = kube_client.param_serialize(
            verb, path, body={} if verb != "GET" else None, auth_settings=["BearerToken"]
        )
        response = kube_client.call_api(method, url, headers, body_)
        response.read()
        assert response.status == 405, (verb, path)
        assert json.loads(response.data)["reason"] == "MethodNotAllowed"


# ---------------------------------------------------------------------------- binding, logs


def test_binding_sets_the_node_once(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("p"))
    response = bind(core, "p")
    assert response.status == 201
    assert json.loads(response.data)["status"] == "Success"
    pod = core.read_namespaced_pod("p", NS)
    assert pod.spec.node_name == "node-1"
    assert [c.type for c in pod.status.conditions] == ["PodScheduled"]
    status, body = failure(bind, core, "p", "node-2")
    assert status == 409 and body["reason"] == "Conflict"
    assert 'already assigned to node "node-1"' in body["message"]


def test_logs_of_a_running_pod_with_tail(emulator: Emulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("p"))
    status, body = failure(core.read_namespaced_pod_log, "p", NS)
    assert (status, body["message"]) == (400, "pod p does not have a host assigned")
    bind(core, "p")
    status, body = failure(core.read_namespaced_pod_log, "p", NS)
    assert status == 400
    assert body["message"] == 'container "main" in pod "p" is waiting to start: ContainerCreating'
    start_container(core, "p")
    write_log(emulator, "p", "one\ntwo\nthree\n")
    assert core.read_namespaced_pod_log("p", NS) == "one\ntwo\nthree\n"
    assert core.read_namespaced_pod_log("p", NS, tail_lines=2) == "two\nthree\n"
    status, body = failure(core.read_namespaced_pod_log, "p", NS, previous=True)
    assert status == 400 and "previous terminated container" in body["message"]


def test_logs_need_a_container_name_when_the_pod_has_several(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("p", containers=("a", "b")))
    bind(core, "p")
    status, body = failure(core.read_namespaced_pod_log, "p", NS)
    assert status == 400
    assert body["message"] == "a container name must be specified for pod p, choose one of: [a b]"
    status, body = failure(core.read_namespaced_pod_log, "p", NS, container="c")
    assert (status, body["message"]) == (400, "container c is not valid for pod p")


def test_follow_streams_until_the_pod_finishes(emulator: Emulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_body("p"))
    bind(core, "p")
    start_container(core, "p")
    write_log(emulator, "p", "first\n")
    lines = watch.Watch().stream(core.read_namespaced_pod_log, "p", NS, follow=True)
    assert next(lines) == "first"
    write_log(emulator, "p", "second\n")
    assert next(lines) == "second"
    write_log(emulator, "p", "last\n")
    core.patch_namespaced_pod_status("p", NS, {"status": {"phase": "Succeeded"}})
    assert list(lines) == ["last"]


@pytest.fixture
def second_client(emulator: Emulator) -> Iterator[client.ApiClient]:
    api = api_client_for(str(emulator.kubeconfig_path))
    yield api
    api.close()


def test_clients_share_one_server(core: client.CoreV1Api, second_client: client.ApiClient) -> None:
    core.create_namespaced_secret(NS, {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    other = client.CoreV1Api(second_client)
    assert other.read_namespaced_secret("s", NS).data == {"k": "dg=="}


# ------------------------------------------------------------------------------------ facade


def test_stop_ends_open_streams_and_removes_the_workdir() -> None:
    emu = Emulator()
    emu.start()
    api = api_client_for(str(emu.kubeconfig_path))
    core = client.CoreV1Api(api)
    stream = watch.Watch().stream(core.list_namespace, timeout_seconds=60)
    assert next(stream)["type"] == "ADDED"
    emu.stop()
    with pytest.raises(urllib3.exceptions.ProtocolError):
        list(stream)
    assert not emu.workdir.exists()
    api.close()


def test_advance_to_needs_a_fake_clock(emulator: Emulator) -> None:
    with pytest.raises(TypeError):
        emulator.advance_to(datetime.now(UTC))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with Emulator(clock=FakeClock(start)) as emu:
        emu.advance_to(start + timedelta(minutes=5))
        assert emu.clock.now() == start + timedelta(minutes=5)
        api = api_client_for(str(emu.kubeconfig_path))
        created = client.CoreV1Api(api).create_namespaced_config_map(
            NS, {"metadata": {"name": "c"}}
        )
        assert created.metadata.creation_timestamp == start + timedelta(minutes=5)
        api.close()
