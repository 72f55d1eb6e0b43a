"""The one demand model: its two spellings, its strict quantities and what it must name."""

import pytest
from pydantic import ValidationError

from wharf.config.settings import PoolResourceDemand, ResourceSettings
from wharf.core.resources import ResourceDemand
from wharf.resource_manager.contract.models import DemandSpec, ResourceRequestCreate


def test_settings_and_the_rm_contract_share_the_one_model():
    assert PoolResourceDemand is ResourceDemand
    assert DemandSpec is ResourceDemand
    assert all(type(d) is ResourceDemand for d in ResourceSettings(cpu_count=1).canonical_demands())


def test_python_spelling_and_wire_spelling():
    demand = ResourceDemand(name="license", quantity=2, class_name="big")
    assert demand.model_dump(exclude_unset=True) == {
        "name": "license",
        "quantity": 2,
        "class_name": "big",
    }
    wire = '{"resource":"license","kind":null,"resource_selector":null,"quantity":2,'
    wire += '"unit":null,"class":"big","class_selector":null}'
    assert demand.model_dump_json(by_alias=True) == wire
    assert ResourceDemand.model_validate_json(wire) == demand
    assert ResourceDemand.model_validate({"name": "license", "quantity": 2, "class": "big"}) == (
        demand
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"quantity": 1}, "require a resource name, resource kind, or resource selector"),
        ({"kind": "gpu", "quantity": 0}, "greater than 0"),
        ({"kind": "gpu", "quantity": 1.5}, "valid integer"),
        ({"kind": "gpu", "quantity": True}, "valid integer"),
        ({"name": "two words"}, "pattern"),
        ({"kind": "gpu", "class_name": "a", "class_selector": {"name": "a"}}, "not both"),
    ],
)
def test_bad_demands_fail_where_they_are_written(fields, message):
    with pytest.raises(ValidationError, match=message):
        ResourceDemand(**fields)


def test_a_class_and_a_class_selector_are_refused_in_the_spelling_written():
    """``class_name`` in Python and stored settings (``ResourceSettings(resources=...)``),
    ``class`` on the RM wire: the error names the field its writer wrote."""
    selector = {"class_selector": {"name": "a"}}
    with pytest.raises(ValidationError, match=r"Give either class_name or class_selector, not"):
        ResourceDemand(kind="gpu", class_name="a", **selector)
    with pytest.raises(ValidationError, match=r"Give either class_name or class_selector, not"):
        ResourceSettings(resources=[{"kind": "gpu", "class_name": "a", **selector}])
    wire = '{"kind": "gpu", "class": "a", "class_selector": {"name": "a"}}'
    with pytest.raises(ValidationError, match=r"Give either class or class_selector, not both"):
        ResourceDemand.model_validate_json(wire)


def test_selectors_travel_in_their_canonical_form_and_bad_ones_are_input_errors():
    subjects = [{"nodes": [{"subject_type": "account", "subject_id": "me"}]}]
    demand = {"quantity": 1, "resource_selector": {"attributes": {"vendor": "nvidia"}}}
    body = ResourceRequestCreate.model_validate({"subjects": subjects, "demands": [demand]})
    selector = body.demands[0].resource_selector
    assert selector is not None and selector["attributes"] == {"vendor": "nvidia"}
    assert "all" in selector  # the selector's own full dump, as the contract always sent it
    with pytest.raises(ValidationError, match="resource_selector"):
        ResourceRequestCreate.model_validate(
            {"subjects": subjects, "demands": [{"quantity": 1, "resource_selector": {"x": 1}}]}
        )
