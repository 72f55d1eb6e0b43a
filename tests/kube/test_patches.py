"""Patches of the kube emulator: merge patch, strategic merge patch and JSON patch."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.patches import apply_patch

MERGE = "application/merge-patch+json"
SMP = "application/strategic-merge-patch+json"
JSONP = "application/json-patch+json"

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "labels": {"a": "1", "b": "2"},
        "finalizers": ["x/one"],
        "ownerReferences": [{"uid": "u1", "name": "j", "kind": "Job"}],
    },
    "spec": {
        "restartPolicy": "Never",
        "tolerations": [{"key": "k1"}],
        "containers": [
            {
                "name": "main",
                "image": "img:1",
                "args": ["a", "b"],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 80, "name": "http"}],
                "volumeMounts": [{"mountPath": "/data", "name": "data"}],
            },
            {"name": "side", "image": "side:1"},
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]},
}


def patched(patch: Any, content_type: str, kind: str = "Pod", target: Any = None) -> Any:
    target = copy.deepcopy(POD) if target is None else target
    before = copy.deepcopy(target)
    result = apply_patch(target, patch, content_type, kind)
    assert target == before, "apply_patch mutated its target"
    return result


# --- merge patch ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "path", "expected"),
    [
        (
            {"metadata": {"labels": {"c": "3"}}},
            ("metadata", "labels"),
            {"a": "1", "b": "2", "c": "3"},
        ),
        ({"metadata": {"labels": {"a": None}}}, ("metadata", "labels"), {"b": "2"}),
        ({"metadata": {"labels": None}}, ("metadata", "labels"), None),
        (
            {"spec": {"containers": [{"name": "main", "image": "img:2"}]}},
            ("spec", "containers"),
            [{"name": "main", "image": "img:2"}],
        ),
        ({"spec": {"restartPolicy": "Always"}}, ("spec", "restartPolicy"), "Always"),
        ({"spec": {"new": {"deep": {"x": None, "y": 1}}}}, ("spec", "new"), {"deep": {"y": 1}}),
        ({"status": {"phase": {"odd": 1}}}, ("status", "phase"), {"odd": 1}),
        ({}, ("metadata", "name"), "p"),
    ],
)
def test_merge_patch(patch: dict[str, Any], path: tuple[str, ...], expected: Any) -> None:
    result: Any = patched(patch, MERGE)
    for key in path:
        result = result.get(key) if result is not None else None
    assert result == expected


def test_merge_patch_leaves_patch_untouched_and_result_independent() -> None:
    patch = {"metadata": {"annotations": {"k": "v"}}}
    result = patched(patch, MERGE)
    result["metadata"]["annotations"]["k"] = "changed"
    assert patch == {"metadata": {"annotations": {"k": "v"}}}


def test_merge_patch_content_type_parameters_are_ignored() -> None:
    result = patched({"spec": {"restartPolicy": "Always"}}, MERGE + "; charset=utf-8")
    assert result["spec"]["restartPolicy"] == "Always"


@pytest.mark.parametrize("patch", [[1, 2], "x", 3])
def test_merge_patch_must_be_an_object(patch: Any) -> None:
    with pytest.raises(ApiError) as info:
        patched(patch, MERGE)
    assert info.value.code == 400


# --- strategic merge patch --------------------------------------------------------------------


def _container(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in result["spec"]["containers"] if c["name"] == name)


def test_smp_merges_containers_by_name() -> None:
    result = patched({"spec": {"containers": [{"name": "main", "image": "img:2"}]}}, SMP)
    names = [c["name"] for c in result["spec"]["containers"]]
    assert names == ["main", "side"]
    main = _container(result, "main")
    assert main["image"] == "img:2"
    assert main["args"] == ["a", "b"]
    assert len(main["env"]) == 2


def test_smp_appends_a_new_container() -> None:
    result = patched({"spec": {"containers": [{"name": "extra", "image": "e"}]}}, SMP)
    assert [c["name"] for c in result["spec"]["containers"]] == ["main", "side", "extra"]


def test_smp_merges_env_ports_and_mounts_by_their_keys() -> None:
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
                    "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}],
                    "volumeMounts": [{"mountPath": "/data", "readOnly": True}],
                }
            ]
        }
    }
    main = _container(patched(patch, SMP), "main")
    assert main["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "20"},
        {"name": "C", "value": "3"},
    ]
    assert main["ports"] == [
        {"containerPort": 80, "name": "http", "protocol": "TCP"},
        {"containerPort": 81},
    ]
    assert main["volumeMounts"] == [{"mountPath": "/data", "name": "data", "readOnly": True}]


def test_smp_replaces_lists_without_a_merge_key() -> None:
    patch = {
        "spec": {"tolerations": [{"key": "k2"}], "containers": [{"name": "main", "args": ["c"]}]}
    }
    result = patched(patch, SMP)
    assert result["spec"]["tolerations"] == [{"key": "k2"}]
    assert _container(result, "main")["args"] == ["c"]


def test_smp_delete_directive_removes_a_list_item() -> None:
    patch = {
        "spec": {
            "containers": [
                {"name": "side", "$patch": "delete"},
                {"name": "main", "env": [{"name": "A", "$patch": "delete"}]},
            ]
        }
    }
    result = patched(patch, SMP)
    assert [c["name"] for c in result["spec"]["containers"]] == ["main"]
    assert _container(result, "main")["env"] == [{"name": "B", "value": "2"}]


def test_smp_replace_directive_in_a_list_replaces_it() -> None:
    patch = {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o"}]}}
    assert patched(patch, SMP)["spec"]["containers"] == [{"name": "only", "image": "o"}]


def test_smp_map_directives() -> None:
    replaced = patched({"metadata": {"labels": {"$patch": "replace", "z": "9"}}}, SMP)
    assert replaced["metadata"]["labels"] == {"z": "9"}
    deleted = patched({"metadata": {"labels": {"$patch": "delete"}}}, SMP)
    assert "labels" not in deleted["metadata"]


def test_smp_null_deletes_and_directives_are_dropped() -> None:
    patch = {
        "metadata": {"labels": {"a": None}},
        "spec": {
            "$retainKeys": ["containers"],
            "$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
            "volumes": None,
        },
    }
    result = patched(patch, SMP)
    assert result["metadata"]["labels"] == {"b": "2"}
    assert "volumes" not in result["spec"]
    assert not any(key.startswith("$") for key in result["spec"])


def test_smp_finalizers_merge_as_a_set_and_delete_from_primitive_list() -> None:
    added = patched({"metadata": {"finalizers": ["x/two", "x/one"]}}, SMP)
    assert added["metadata"]["finalizers"] == ["x/one", "x/two"]
    removed = patched({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/one"]}}, SMP)
    assert removed["metadata"]["finalizers"] == []
    # A merge patch replaces the list instead.
    assert patched({"metadata": {"finalizers": ["x/two"]}}, MERGE)["metadata"]["finalizers"] == [
        "x/two"
    ]


def test_smp_owner_references_by_uid_and_conditions_by_type() -> None:
    patch = {
        "metadata": {"ownerReferences": [{"uid": "u2", "name": "k"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Initialized"}]},
    }
    result = patched(patch, SMP)
    assert [r["uid"] for r in result["metadata"]["ownerReferences"]] == ["u1", "u2"]
    assert result["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "Initialized"},
    ]


def test_smp_reaches_pod_templates_of_jobs_and_cronjobs() -> None:
    template = {
        "spec": {"containers": [{"name": "main", "image": "a"}, {"name": "b", "image": "b"}]}
    }
    job = {"kind": "Job", "spec": {"template": copy.deepcopy(template)}}
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "a2"}]}}}}
    result = patched(patch, SMP, "Job", job)
    assert [c["image"] for c in result["spec"]["template"]["spec"]["containers"]] == ["a2", "b"]

    cronjob = {"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": template}}}}
    patch = {
        "spec": {
            "jobTemplate": {
                "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b2"}]}}}
            }
        }
    }
    result = patched(patch, SMP, "CronJob", cronjob)
    containers = result["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert [c["image"] for c in containers] == ["a", "b2"]


def test_smp_on_other_kinds_merges_maps_and_replaces_lists() -> None:
    cm = {"kind": "ConfigMap", "data": {"a": "1", "b": "2"}, "list": [1, 2]}
    result = patched({"data": {"a": None, "c": "3"}, "list": [3]}, SMP, "ConfigMap", cm)
    assert result == {"kind": "ConfigMap", "data": {"b": "2", "c": "3"}, "list": [3]}


@pytest.mark.parametrize(
    ("patch", "code"),
    [
        ([{"op": "add"}], 400),
        ({"spec": {"containers": [{"image": "x"}]}}, 500),
        ({"spec": {"containers": [{"$patch": "delete"}]}}, 400),
        ({"metadata": {"labels": {"$patch": "merge-ish"}}}, 400),
        ({"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}}, 400),
    ],
)
def test_smp_errors(patch: Any, code: int) -> None:
    with pytest.raises(ApiError) as info:
        patched(patch, SMP)
    assert info.value.code == code


# --- JSON patch -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ops", "path", "expected"),
    [
        (
            [{"op": "add", "path": "/metadata/labels/c", "value": "3"}],
            ("metadata", "labels", "c"),
            "3",
        ),
        (
            [{"op": "replace", "path": "/spec/restartPolicy", "value": "Always"}],
            ("spec", "restartPolicy"),
            "Always",
        ),
        ([{"op": "remove", "path": "/metadata/labels/a"}], ("metadata", "labels"), {"b": "2"}),
        (
            [{"op": "add", "path": "/spec/containers/0/args/-", "value": "c"}],
            ("spec", "containers", 0, "args"),
            ["a", "b", "c"],
        ),
        (
            [{"op": "add", "path": "/spec/containers/0/args/0", "value": "z"}],
            ("spec", "containers", 0, "args"),
            ["z", "a", "b"],
        ),
        (
            [{"op": "remove", "path": "/spec/containers/0/args/1"}],
            ("spec", "containers", 0, "args"),
            ["a"],
        ),
        (
            [{"op": "replace", "path": "/spec/containers/1/image", "value": "side:2"}],
            ("spec", "containers", 1, "image"),
            "side:2",
        ),
        (
            [
                {"op": "add", "path": "/metadata/annotations", "value": {"a~b/c": "1"}},
                {"op": "replace", "path": "/metadata/annotations/a~0b~1c", "value": "2"},
            ],
            ("metadata", "annotations"),
            {"a~b/c": "2"},
        ),
        (
            [{"op": "copy", "from": "/metadata/labels", "path": "/metadata/annotations"}],
            ("metadata", "annotations"),
            {"a": "1", "b": "2"},
        ),
        (
            [{"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/z"}],
            ("metadata", "labels"),
            {"b": "2", "z": "1"},
        ),
        (
            [
                {"op": "test", "path": "/spec/restartPolicy", "value": "Never"},
                {"op": "replace", "path": "/spec/restartPolicy", "value": "OnFailure"},
            ],
            ("spec", "restartPolicy"),
            "OnFailure",
        ),
        (
            [{"op": "test", "path": "/spec/containers/0/ports/0/containerPort", "value": 80.0}],
            ("spec", "containers", 0, "ports", 0, "containerPort"),
            80,
        ),
        ([], ("metadata", "name"), "p"),
        ([{"op": "add", "path": "/spec/extra"}], ("spec", "extra"), None),
    ],
)
def test_json_patch(ops: list[dict[str, Any]], path: tuple[Any, ...], expected: Any) -> None:
    result: Any = patched(ops, JSONP)
    for key in path:
        result = result[key]
    assert result == expected


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/spec/restartPolicy", "value": "Always"}],
        [{"op": "test", "path": "/spec/containers/0/ports/0/containerPort", "value": True}],
        [{"op": "test", "path": "/spec/missing", "value": None}],
        [{"op": "remove", "path": "/metadata/labels/missing"}],
        [{"op": "replace", "path": "/spec/missing", "value": 1}],
        [{"op": "add", "path": "/spec/missing/deeper", "value": 1}],
        [{"op": "add", "path": "/spec/containers/5", "value": {}}],
        [{"op": "remove", "path": "/spec/containers/2"}],
        [{"op": "move", "from": "/nope", "path": "/x"}],
        [{"op": "move", "from": "/metadata", "path": "/metadata/inner"}],
        [{"op": "copy", "from": "/spec/containers/9", "path": "/x"}],
        [{"op": "frobnicate", "path": "/x"}],
        [{"op": "add", "path": "no-slash", "value": 1}],
        [{"op": "remove", "path": "/spec/containers/\u0661"}],
    ],
)
def test_json_patch_that_does_not_apply_is_422(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(ApiError) as info:
        patched(ops, JSONP)
    assert (info.value.code, info.value.reason) == (422, "Invalid")
    assert info.value.details is not None
    assert info.value.details["causes"][0]["reason"] == "UnexpectedServerResponse"


def test_json_patch_failed_test_message() -> None:
    with pytest.raises(ApiError) as info:
        patched([{"op": "test", "path": "/spec/restartPolicy", "value": "Always"}], JSONP)
    assert info.value.details is not None
    assert info.value.details["causes"][0]["message"] == (
        "testing value /spec/restartPolicy failed: test failed"
    )


def test_json_patch_failure_is_atomic() -> None:
    ops = [
        {"op": "replace", "path": "/spec/restartPolicy", "value": "Always"},
        {"op": "test", "path": "/metadata/name", "value": "other"},
    ]
    target = copy.deepcopy(POD)
    with pytest.raises(ApiError):
        apply_patch(target, ops, JSONP, "Pod")
    assert target == POD


@pytest.mark.parametrize("ops", [{"op": "add"}, "x", [1]])
def test_malformed_json_patch_is_400(ops: Any) -> None:
    with pytest.raises(ApiError) as info:
        patched(ops, JSONP)
    assert (info.value.code, info.value.reason) == (400, "BadRequest")


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "application/yaml", ""])
def test_other_content_types_are_415(content_type: str) -> None:
    with pytest.raises(ApiError) as info:
        patched({}, content_type)
    assert (info.value.code, info.value.reason) == (415, "UnsupportedMediaType")
    assert info.value.message.startswith(
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json"
    )
