"""Label and field selectors of the kube emulator: grammar, matching and real-server errors."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.selectors import (
    parse_field_selector,
    parse_label_selector,
    selector_from_label_selector_object,
)

LABELS = {"app": "web", "tier": "front", "env": "prod", "n": "5", "empty": ""}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app = web", True),
        ("  app=web ,  tier = front  ", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("app in (web,db)", True),
        ("app in (db, cache)", False),
        ("app notin (db,cache)", True),
        ("app notin (web)", False),
        ("missing notin (x)", True),
        ("missing in (x)", False),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app,!missing,tier in (front)", True),
        ("empty=", True),
        ("empty", True),
        ("empty in ()", True),
        ("app in ()", False),
        ("empty in (,x)", True),
        ("app in (x,,web)", True),
        ("n>4", True),
        ("n>5", False),
        ("n<6", True),
        ("missing<6", False),
        ("app>1", False),
        ("example.com/role", False),
        ("in in (in)", False),
        ("app in (in, web)", True),
        ("app=web,app=db", False),
    ],
)
def test_label_selector_matches(selector: str, expected: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is expected


def test_label_selector_with_prefixed_keys_and_none_labels() -> None:
    selector = parse_label_selector("wharf.dev/run-id=abc,wharf.dev/step")
    assert selector.matches({"wharf.dev/run-id": "abc", "wharf.dev/step": "x"})
    assert not selector.matches({"wharf.dev/run-id": "abc"})
    assert not selector.matches(None)
    assert parse_label_selector(None).matches(None)
    assert parse_label_selector("!a").matches(None)


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("app=web,", "found '', expected: identifier after ','"),
        (",app", "found ',', expected: !, identifier, or 'end of string'"),
        (
            "app web",
            "unable to parse requirement: found 'web', expected: '=', '!=', '==', 'in', notin'",
        ),
        ("app=a=b", "found '=', expected: ',' or 'end of string'"),
        ("!app=web", "found '=', expected: ',' or 'end of string'"),
        ("app in web", "unable to parse requirement: found 'web' expected: '('"),
        ("app in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'"),
        ("app in (a", "unable to parse requirement: found '', expected: ',' or ')'"),
        (
            "app in (=)",
            "unable to parse requirement: found '=', expected: ',', ')' or identifier",
        ),
        ("app==(x)", "unable to parse requirement: found '(', expected: identifier"),
        (
            "app>x",
            "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        (
            "a=b c",
            "found 'c', expected: ',' or 'end of string'",
        ),
    ],
)
def test_label_selector_syntax_errors(selector: str, message: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_label_selector(selector)
    assert (info.value.code, info.value.reason) == (400, "BadRequest")
    assert info.value.message == message


@pytest.mark.parametrize(
    ("selector", "start"),
    [
        ("a$b=c", 'unable to parse requirement: invalid label key "a$b": name part must consist'),
        ("-a", 'unable to parse requirement: invalid label key "-a": name part must consist'),
        (
            "x" * 64,
            f'unable to parse requirement: invalid label key "{"x" * 64}": name part must be no more than 63 characters',
        ),
        (
            "/a",
            'unable to parse requirement: invalid label key "/a": prefix part must be non-empty',
        ),
        (
            "Bad_Prefix/a",
            'unable to parse requirement: invalid label key "Bad_Prefix/a": prefix part a lowercase RFC 1123 subdomain',
        ),
        (
            "a/b/c",
            'unable to parse requirement: invalid label key "a/b/c": a qualified name must consist',
        ),
        (
            "a=b$",
            'unable to parse requirement: invalid label value: "b$": at key: "a": a valid label must be an empty string',
        ),
        (
            "a=" + "v" * 64,
            'unable to parse requirement: invalid label value: "'
            + "v" * 64
            + '": at key: "a": must be no more than 63 characters',
        ),
        ("a in (-x)", 'unable to parse requirement: invalid label value: "-x": at key: "a"'),
    ],
)
def test_label_selector_rejects_invalid_keys_and_values(selector: str, start: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_label_selector(selector)
    assert info.value.code == 400
    assert info.value.message.startswith(start), info.value.message


def test_label_key_error_wording_matches_the_real_server() -> None:
    with pytest.raises(ApiError) as info:
        parse_label_selector("a$")
    assert info.value.message == (
        'unable to parse requirement: invalid label key "a$": name part must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    )


@pytest.mark.parametrize(
    ("obj", "labels", "expected"),
    [
        ({}, {"a": "b"}, True),
        (None, {}, True),
        ({"matchLabels": {"job-name": "j1"}}, {"job-name": "j1", "x": "y"}, True),
        ({"matchLabels": {"job-name": "j1"}}, {"job-name": "j2"}, False),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
            {"a": "2"},
            True,
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
            {"a": "1"},
            False,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
        (
            {
                "matchLabels": {"c": "d"},
                "matchExpressions": [{"key": "a", "operator": "Exists", "values": []}],
            },
            {"a": "x", "c": "d"},
            True,
        ),
    ],
)
def test_selector_from_label_selector_object(
    obj: dict[str, Any] | None, labels: dict[str, str], expected: bool
) -> None:
    assert selector_from_label_selector_object(obj).matches(labels) is expected


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            '"Gt" is not a valid pod selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "values set must be empty for exists and does not exist",
        ),
    ],
)
def test_selector_object_errors(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError) as info:
        selector_from_label_selector_object(obj)
    assert (info.value.code, info.value.message) == (400, message)


POD = {
    "metadata": {"name": "p1", "namespace": "ns1"},
    "spec": {"nodeName": "node-a", "restartPolicy": "Never", "serviceAccountName": "default"},
    "status": {"phase": "Running", "podIP": "10.0.0.5"},
}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("metadata.name=p1", True),
        ("metadata.name==p1", True),
        ("metadata.name!=p1", False),
        ("metadata.namespace=ns1,status.phase=Running", True),
        ("status.phase!=Succeeded,status.phase!=Failed", True),
        ("status.phase=Pending", False),
        ("spec.nodeName=node-a", True),
        ("spec.host=node-a", True),
        ("spec.nodeName=", False),
        ("spec.schedulerName=", True),
        ("spec.restartPolicy=Never", True),
        ("spec.serviceAccountName=default", True),
        ("status.podIP=10.0.0.5", True),
        ("status.nominatedNodeName=", True),
        ("metadata.name=p1,", True),
    ],
)
def test_pod_field_selectors(selector: str, expected: bool) -> None:
    assert parse_field_selector(selector, "Pod").matches(POD) is expected


def test_unbound_pod_matches_an_empty_node_name() -> None:
    pending = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}}
    assert parse_field_selector("spec.nodeName=", "Pod").matches(pending)
    assert not parse_field_selector("spec.nodeName!=", "Pod").matches(pending)


@pytest.mark.parametrize(
    ("kind", "selector", "obj", "expected"),
    [
        ("Job", "status.successful=1", {"status": {"succeeded": 1}}, True),
        ("Job", "status.successful=0", {"status": {}}, True),
        ("Job", "status.successful=0", {}, True),
        ("Secret", "type=Opaque", {"type": "Opaque"}, True),
        ("Secret", "type!=Opaque", {"type": "kubernetes.io/tls"}, True),
        ("Namespace", "status.phase=Active", {"status": {"phase": "Active"}}, True),
        ("Namespace", "metadata.name=ns", {"metadata": {"name": "ns"}}, True),
        (
            "Event",
            "involvedObject.name=p1,reason=Failed",
            {"involvedObject": {"name": "p1"}, "reason": "Failed"},
            True,
        ),
        ("Event", "involvedObject.kind=Pod", {"involvedObject": {"kind": "Job"}}, False),
        (
            "Event",
            "source=kubelet,type=Warning",
            {"source": {"component": "kubelet"}, "type": "Warning"},
            True,
        ),
        ("ConfigMap", "metadata.name=c", {"metadata": {"name": "c"}}, True),
        ("CronJob", "metadata.namespace=ns", {"metadata": {"namespace": "other"}}, False),
        ("ConfigMap", r"metadata.name=a\,b", {"metadata": {"name": "a,b"}}, True),
        ("ConfigMap", r"metadata.name=a\=b\\c", {"metadata": {"name": "a=b\\c"}}, True),
    ],
)
def test_field_selectors_per_kind(
    kind: str, selector: str, obj: dict[str, Any], expected: bool
) -> None:
    assert parse_field_selector(selector, kind).matches(obj) is expected


@pytest.mark.parametrize(
    ("kind", "selector", "message"),
    [
        ("Pod", "spec.containers=x", "field label not supported: spec.containers"),
        ("Pod", "metadata.name =x", "field label not supported: metadata.name "),
        ("Namespace", "metadata.namespace=x", "field label not supported: metadata.namespace"),
        ("Job", "status.phase=x", "field label not supported: status.phase"),
        ("Secret", "data=x", "field label not supported: data"),
        (
            "ConfigMap",
            "data.x=y",
            '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        (
            "CronJob",
            "status.phase=x",
            '"status.phase" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        (
            "Pod",
            "status.phase",
            "invalid selector: 'status.phase'; can't understand 'status.phase'",
        ),
        (
            "Pod",
            "metadata.name=a,status.phase",
            "invalid selector: 'metadata.name=a,status.phase'; can't understand 'status.phase'",
        ),
        ("Pod", r"metadata.name=a\x", r"invalid field selector: invalid escape sequence: \x"),
        ("Pod", "metadata.name=a=b", "invalid field selector: unescaped character in value: ="),
        ("Pod", "metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
    ],
)
def test_field_selector_errors(kind: str, selector: str, message: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_field_selector(selector, kind)
    assert (info.value.code, info.value.reason, info.value.message) == (400, "BadRequest", message)
