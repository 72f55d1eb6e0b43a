"""Who may name which subjects and see which requests (``service/principal.py``), as rules and
through the service: an untrusted principal's requests get its own account subject; another
principal's request is not found."""

from __future__ import annotations

import pytest

from tests.resource_manager.service.helpers import ADMIN, request_spec, setup_pool
from wharf.core.errors import EntityNotFoundError
from wharf.resource_manager.contract.errors import PermissionDeniedError
from wharf.resource_manager.contract.models import RequestFilter
from wharf.resource_manager.domain import SubjectChain, SubjectNode
from wharf.resource_manager.service import Principal, ResourceManagerService
from wharf.resource_manager.service.principal import may_see, own_subjects

SERVER = Principal("workspace", asserts_subjects=True)
ALICE, BOB = Principal("alice"), Principal("bob")  # not trusted
PROJECT = SubjectChain.of(("project", "p1"), ("step_run", "s1"))
OWN = SubjectChain(
    nodes=(SubjectNode(subject_type="account", subject_id="bob", attributes={"name": "bob"}),)
)


def _account(name: str, **attributes: bool | str) -> SubjectNode:
    return SubjectNode(subject_type="account", subject_id=name, attributes=attributes)


def test_trusted_principals_name_any_subjects() -> None:
    subjects = (SubjectChain(nodes=(_account("carol", is_superuser=True),)), PROJECT)
    for principal in (ADMIN, SERVER):
        assert own_subjects(principal, subjects) is subjects


def test_anybody_else_names_its_own_account_only() -> None:
    for given in (_account("bob"), _account("bob", is_superuser=True)):
        assert own_subjects(BOB, (SubjectChain(nodes=(given,)),)) == (OWN,)
    nested = SubjectChain(nodes=(*PROJECT.nodes[:1], _account("bob")))
    for others, named in (
        ((SubjectChain(nodes=(_account("carol"),)),), "account 'carol'"),
        ((OWN, PROJECT), "project 'p1'"),
        ((nested,), "project 'p1'"),
    ):
        with pytest.raises(PermissionDeniedError, match=f"cannot name {named}"):
            own_subjects(BOB, others)


def test_who_sees_a_request() -> None:
    assert may_see(None, "alice") and may_see(ADMIN, "alice") and may_see(ALICE, "alice")
    assert not may_see(BOB, "alice") and not may_see(SERVER, "alice")


def _for(name: str) -> dict[str, object]:
    account = {"nodes": [{"subject_type": "account", "subject_id": name}]}
    return {**request_spec().model_dump(mode="json", by_alias=True), "subjects": [account]}


def test_the_service_applies_both(rm: ResourceManagerService) -> None:
    setup_pool(rm, subject_selector={"subject_type": "account"})
    with pytest.raises(PermissionDeniedError):
        rm.requests.create(BOB, request_spec())  # a project
    bobs = rm.requests.create(BOB, _for("bob"))
    assert bobs.subjects == (OWN,)
    alices = rm.requests.create(ALICE, _for("alice"))
    for viewer in (None, ADMIN, ALICE):
        assert rm.requests.get(alices.id, viewer=viewer).id == alices.id
    with pytest.raises(EntityNotFoundError, match=f"Resource request {alices.id} not found"):
        rm.requests.get(alices.id, viewer=BOB)
    with pytest.raises(EntityNotFoundError):
        rm.requests.explain(alices.id, viewer=BOB)
    assert rm.requests.explain(bobs.id, viewer=BOB).request_id == bobs.id
    assert {r.id for r in rm.requests.list(viewer=BOB).items} == {bobs.id}
    assert rm.requests.list(RequestFilter(requester="alice"), viewer=BOB).total == 0
    assert {r.id for r in rm.requests.list(viewer=ADMIN).items} == {alices.id, bobs.id}
    assert {r.id for r in rm.requests.list(viewer=SERVER).items} == set()
