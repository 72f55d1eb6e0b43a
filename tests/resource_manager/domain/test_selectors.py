"""Subject chains and selectors: validation, matching, anchors, compiled matchers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from wharf.core.errors import InputError
from wharf.resource_manager.domain import (
    AttributeSelector,
    SubjectChain,
    SubjectNode,
    SubjectSet,
    SubjectType,
    parse_attribute_selector,
    parse_subject_selector,
)

STEP = SubjectChain(
    nodes=(
        SubjectNode(subject_type="organization", subject_id="org"),
        SubjectNode(subject_type="workspace", subject_id="ws", attributes={"tier": "gold"}),
        SubjectNode(subject_type="project", subject_id="p1", attributes={"name": "vision"}),
        SubjectNode(subject_type="pipeline_run", subject_id="run1"),
        SubjectNode(subject_type="step_run", subject_id="s1", metadata={"step": "train"}),
    )
)
COMPONENT = SubjectChain.of(
    ("organization", "org"),
    ("workspace", "ws"),
    SubjectNode(
        subject_type="component",
        subject_id="k8s",
        attributes={"component_type": "step_operator", "gpu": True},
    ),
)
ACCOUNT = SubjectChain(
    nodes=(
        SubjectNode(subject_type="account", subject_id="u1", attributes={"is_superuser": False}),
    )
)
SUBJECTS = SubjectSet.of([STEP, COMPONENT, ACCOUNT])


@pytest.mark.parametrize(
    "types",
    [
        ["workspace", "organization"],
        ["project", "project"],
        ["account", "project"],
        ["component", "account"],
        ["step_run", "pipeline_run"],
    ],
)
def test_chains_must_be_root_first_with_leaf_only_types_last(types):
    with pytest.raises(ValidationError):
        SubjectChain.of(*[(t, f"id-{i}") for i, t in enumerate(types)])


@pytest.mark.parametrize(
    "types",
    [
        ["organization", "workspace", "project", "pipeline_run", "step_run"],
        ["organization", "account"],
        ["account"],
        ["organization", "workspace", "component"],
        ["project"],
    ],
)
def test_valid_chains(types):
    chain = SubjectChain.of(*[(t, f"id-{i}") for i, t in enumerate(types)])
    assert chain.leaf.subject_type == SubjectType(types[-1])
    assert chain.find("id-0") is chain.nodes[0]
    assert chain.find("nope") is None


def test_empty_chain_is_rejected():
    with pytest.raises(ValidationError):
        SubjectChain(nodes=())


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"subject_type": "project", "subject_id": "p1"}, True),
        ({"subject_type": "project", "subject_id": "p2"}, False),
        ({"subject_id": "p1"}, True),
        ({"subject_type": "pipeline"}, False),
        ({"subject_type": "workspace", "attributes": {"tier": "gold"}}, True),
        ({"subject_type": "workspace", "attributes": {"tier": "silver"}}, False),
        ({"attributes": {"name": "vision"}}, True),
        ({"metadata": {"step": "train"}}, True),
        ({"metadata": {"step": "eval"}}, False),
        # atoms match one node: type and attributes of different nodes do not combine
        ({"subject_type": "project", "attributes": {"tier": "gold"}}, False),
        # typed attribute values: True is not 1, False is not 0
        ({"attributes": {"gpu": True}}, True),
        ({"attributes": {"gpu": 1}}, False),
        ({"attributes": {"is_superuser": 0}}, False),
        ({"attributes": {"is_superuser": False}}, True),
        # all combines facts from different chains
        ({"all": [{"subject_id": "p1"}, {"subject_type": "component"}]}, True),
        ({"all": [{"subject_id": "p1"}, {"subject_id": "p2"}]}, False),
        ({"any": [{"subject_id": "p2"}, {"subject_id": "u1"}]}, True),
        ({"any": [{"subject_id": "p2"}, {"subject_id": "p3"}]}, False),
        ({"not": {"subject_id": "p2"}}, True),
        ({"not": {"subject_id": "p1"}}, False),
        ({"subject_type": "project", "not": {"attributes": {"is_superuser": True}}}, True),
        (
            {
                "all": [
                    {"any": [{"subject_id": "x"}, {"subject_id": "s1"}]},
                    {"not": {"subject_id": "y"}},
                ]
            },
            True,
        ),
    ],
)
def test_subject_selector_matching(selector, expected):
    parsed = parse_subject_selector(selector)
    assert parsed.matches(SUBJECTS) is expected
    assert parsed.compile()(SUBJECTS) is expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "needs at least one criterion"),
        ({"any": []}, "'any' needs at least one selector"),
        ({"all": []}, "'all' needs at least one selector"),
        ({"subject_type": "galaxy"}, "subject_type"),
        ({"subject_id": ""}, "subject_id"),
        ({"colour": "red"}, "colour"),
        ({"not": {}}, "not"),
        ({"attributes": {"x": [1]}}, "attributes"),
        ("project", "Invalid subject selector"),
    ],
)
def test_malformed_subject_selectors_raise_input_error(data, message):
    with pytest.raises(InputError, match=message):
        parse_subject_selector(data)


def test_selectors_are_limited_in_depth():
    data: dict[str, object] = {"subject_id": "x"}
    for _ in range(8):
        data = {"not": data}
    with pytest.raises(InputError, match="at most 8 levels"):
        parse_subject_selector(data)


def test_selector_aliases_round_trip():
    selector = parse_subject_selector({"any": [{"subject_id": "a"}], "not": {"subject_id": "b"}})
    dumped = selector.model_dump(by_alias=True, exclude_defaults=True)
    assert parse_subject_selector(dumped) == selector


@pytest.mark.parametrize(
    ("selector", "anchors"),
    [
        ({"subject_type": "project", "subject_id": "p1"}, {("id", "p1")}),
        ({"subject_type": "project"}, {("type", "project")}),
        ({"subject_type": "workspace", "attributes": {"team": "a"}}, {("attr", "team=str:a")}),
        ({"attributes": {"gpu": True}}, {("attr", "gpu=bool:True")}),
        ({"metadata": {"k": "v"}}, None),
        ({"not": {"subject_id": "p1"}}, None),
        ({"any": [{"subject_id": "a"}, {"subject_id": "b"}]}, {("id", "a"), ("id", "b")}),
        ({"any": [{"subject_id": "a"}, {"metadata": {"k": "v"}}]}, None),
        ({"subject_type": "project", "all": [{"subject_id": "x"}]}, {("id", "x")}),
    ],
)
def test_anchors_are_necessary_facts(selector, anchors):
    parsed = parse_subject_selector(selector)
    assert parsed.anchors() == (frozenset(anchors) if anchors is not None else None)


@pytest.mark.parametrize(
    ("selector", "name", "attributes", "kind", "expected"),
    [
        ({"name": "h100"}, "h100", {}, None, True),
        ({"name": "h100"}, "a100", {}, None, False),
        ({"attributes": {"vendor": "nvidia"}}, "a100", {"vendor": "nvidia"}, None, True),
        ({"kind": "gpu"}, "GPU", {}, "gpu", True),
        ({"kind": "gpu"}, "pool-1", {}, None, False),
        ({"any": [{"name": "a"}, {"name": "b"}]}, "b", {}, None, True),
        ({"not": {"name": "a"}}, "b", {}, None, True),
        ({"all": [{"name": "a"}, {"attributes": {"x": 1}}]}, "a", {"x": 1}, None, True),
    ],
)
def test_attribute_selector_matching(selector, name, attributes, kind, expected):
    assert parse_attribute_selector(selector).matches(name, attributes, kind) is expected


def test_malformed_attribute_selectors_raise_input_error():
    with pytest.raises(InputError, match="Invalid attribute selector"):
        parse_attribute_selector({"nam": "typo"})
    with pytest.raises(InputError, match="needs at least one criterion"):
        parse_attribute_selector({})
    assert isinstance(parse_attribute_selector(AttributeSelector(name="a")), AttributeSelector)


# -- the compiled matcher and the anchors agree with the reference semantics ------------------

_ids = st.sampled_from(["p1", "p2", "s1", "ws", "u1", "k8s", "zz"])
_types = st.sampled_from([*SubjectType, None])
_attrs = st.dictionaries(
    st.sampled_from(["tier", "gpu", "name"]),
    st.sampled_from(["gold", "vision", True, False, 1]),
    max_size=2,
)
_atoms = st.builds(
    lambda t, i, a, m: (
        {
            k: v
            for k, v in {"subject_type": t, "subject_id": i, "attributes": a, "metadata": m}.items()
            if v
        }
        or {"subject_id": "p1"}
    ),
    _types,
    st.one_of(st.none(), _ids),
    _attrs,
    st.dictionaries(st.just("step"), st.sampled_from(["train", "eval"]), max_size=1),
)
_selectors = st.recursive(
    _atoms,
    lambda children: st.one_of(
        st.builds(lambda xs: {"all": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda xs: {"any": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda x: {"not": x}, children),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(_selectors)
def test_compiled_matcher_and_anchors_agree_with_matches(data):
    selector = parse_subject_selector(data)
    expected = selector.matches(SUBJECTS)
    assert selector.compile()(SUBJECTS) is expected
    anchors = selector.anchors()
    if expected and anchors is not None:
        # A matching subject set always contains one of the selector's anchors.
        assert anchors & set(SUBJECTS.anchors())
