"""Demands, requests and the target-settings merge."""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import ValidationError

from tests.resource_manager.builders import at, chains, gpu, uid
from wharf.core.errors import InputError
from wharf.core.resources import ResourceDemand
from wharf.resource_manager.domain import (
    AttributeSelector,
    Demand,
    ResourceRequest,
    merge_target_settings,
)


def test_demand_must_name_something():
    with pytest.raises(ValidationError, match="require a resource name, resource kind"):
        Demand(quantity=1)
    with pytest.raises(ValidationError, match="either class or class_selector"):
        Demand(resource="GPU", quantity=1, class_name="a", class_selector={"name": "a"})
    with pytest.raises(ValidationError):
        Demand(resource="GPU", quantity=0)


def test_demand_from_the_sdk_canonical_model():
    core = ResourceDemand(kind="gpu", quantity=2, **{"class": "h100"})
    demand = Demand.from_core(core)
    assert (demand.kind, demand.quantity, demand.class_name) == ("gpu", 2, "h100")
    selected = Demand.from_core(
        ResourceDemand(quantity=1, resource_selector={"attributes": {"vendor": "nvidia"}})
    )
    assert selected.resource_selector == AttributeSelector(attributes={"vendor": "nvidia"})
    with pytest.raises(InputError, match=r"'resource_selector\.bogus' is not a known field"):
        Demand.from_core(ResourceDemand(quantity=1, resource_selector={"bogus": 1}))


def test_demand_signature_identifies_equal_demands():
    assert gpu(2, "h100").signature() == gpu(2, "h100").signature()
    assert gpu(2).signature() != gpu(3).signature()


def _request(**kwargs):
    base = {
        "id": uid("r"),
        "subjects": chains("t", "r"),
        "demands": (gpu(1),),
        "created_at": at(0),
    }
    return ResourceRequest(**{**base, **kwargs})


def test_request_validation():
    assert _request().holds_capacity is False
    with pytest.raises(ValidationError, match="either pool or pool_selector"):
        _request(pool="p", pool_selector=AttributeSelector(name="p"))
    with pytest.raises(ValidationError):
        _request(created_at=datetime(2026, 1, 1))  # naive timestamps are refused
    with pytest.raises(ValidationError):
        _request(demands=())
    with pytest.raises(ValidationError):
        _request(subjects=())


def test_target_settings_merge_order_and_depth():
    pool = {"labels": {"team": "ml", "tier": "std"}, "image": "base", "tolerations": ["a"]}
    klass = {"labels": {"tier": "gpu"}, "node_selector": {"gpu": "h100"}}
    policy = {"labels": {"owner": "vision"}, "tolerations": ["b"]}
    grant = {"node_selector": {"zone": "eu"}, "image": "cuda"}
    merged = merge_target_settings(pool, klass, policy, grant)
    assert merged == {
        "labels": {"team": "ml", "tier": "gpu", "owner": "vision"},
        "image": "cuda",
        "tolerations": ["b"],  # lists are replaced whole
        "node_selector": {"gpu": "h100", "zone": "eu"},
    }
    merged["labels"]["team"] = "changed"
    merged["tolerations"].append("c")
    assert pool["labels"]["team"] == "ml" and policy["tolerations"] == ["b"]  # no aliasing


def test_target_settings_merge_of_nothing():
    assert merge_target_settings() == {}
    assert merge_target_settings(None, {}, {"a": 1}) == {"a": 1}
    assert merge_target_settings({"a": {"b": 1}}, {"a": 2}) == {"a": 2}
    assert merge_target_settings({"a": 2}, {"a": {"b": 1}}) == {"a": {"b": 1}}
