# ruff: noqa: F811  (fixtures imported from the RM API conftest)
"""``wharf pool list`` and ``wharf policy list`` page as every list does (``--page``/``--size``
and the same notes under the table), against the embedded Resource Manager; and requests are
found by id prefix (:func:`wharf.cli.rm_names.find_request`) against a real RM server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import _request, _setup, ok, rm, run  # noqa: F401 (fixture rm)
from tests.resource_manager.api.conftest import (  # noqa: F401 (fixtures)
    _rm_sqlite_template,
    server,
    sqlite_rm_url,
)
from wharf.cli.rm_names import find_request
from wharf.config.global_config import load_config
from wharf.core.errors import EntityNotFoundError, InputError
from wharf.resource_manager.client.http import HttpResourceManager
from wharf.resource_manager.contract.models import PolicyCreate, PoolCreate
from wharf.resource_manager.embedded.connect import connect_embedded
from wharf.store.defaults import DEFAULT_USER


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    values["WHARF_HOME"] = str(tmp_path / "home")
    return values


def _names(table: str) -> list[str]:
    return [line.split()[0] for line in table.splitlines()[1:] if not line.endswith("more.")]


def _three_pools_with_policies(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Pools p1..p3, each with a policy, made in the embedded RM as the CLI opens it (their
    ``create`` commands are tested in test_rm_cli.py)."""
    monkeypatch.setenv("WHARF_HOME", env["WHARF_HOME"])
    config = load_config()
    rm = connect_embedded(config.store_url, DEFAULT_USER, config.local_step_slots)
    try:
        for name in ("p1", "p2", "p3"):
            pool = {"name": name, "classes": [{"name": "default", "capacity": {"CPU": 2000}}]}
            rm.pools.create(PoolCreate.model_validate(pool))
            selector = {"subject_type": "account"}
            policy = {"name": f"{name}-all", "pool": name, "subject_selector": selector}
            rm.policies.create(PolicyCreate.model_validate(policy))
    finally:
        rm.close()


def test_pool_and_policy_lists_page(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    _three_pools_with_policies(env, monkeypatch)
    # the whole paging on pools (the table, its footer, every page, past the end, JSON, --size)
    every = [item["name"] for item in json.loads(ok("pool", "list", "-o", "json", env=env))]
    count = len(every)  # the embedded RM has the machine's own pool too
    assert count == 4 and "more" not in ok("pool", "list", env=env)  # one default page
    first = ok("pool", "list", "--size", "2", env=env)
    assert first.splitlines()[-1] == f"2 of {count} shown; use --page/--size for more."
    second = ok("pool", "list", "--size", "2", "--page", "2", env=env)
    assert _names(first) + _names(second) == every  # each once
    past = ok("pool", "list", "--size", "2", "--page", "99", env=env).splitlines()
    assert past[-1] == f"No records on this page: {count} in all; use a lower --page."
    page = json.loads(ok("pool", "list", "--size", "2", "--page", "2", "-o", "json", env=env))
    assert [item["name"] for item in page] == every[2:4]
    assert_one_line_error(run("pool", "list", "--size", "0", env=env), "--size")

    # policies page through the same code: a first page's table, a later page's JSON
    first = ok("policy", "list", "--size", "2", env=env)
    assert first.splitlines()[-1] == "2 of 4 shown; use --page/--size for more."
    page = json.loads(ok("policy", "list", "--size", "2", "--page", "2", "-o", "json", env=env))
    names = _names(first) + [item["name"] for item in page]
    assert names == ["local-default", "p1-all", "p2-all", "p3-all"]  # by name, each once


def test_a_request_is_found_by_id_or_id_prefix(rm: HttpResourceManager) -> None:
    _setup(rm, gpus=8)
    made = [rm.requests.create(_request(f"p{i}")) for i in range(3)]
    for request in made:
        assert find_request(rm.requests, request.id.hex[:12]).id == request.id
        assert find_request(rm.requests, str(request.id)).id == request.id
    with pytest.raises(EntityNotFoundError):
        find_request(rm.requests, "0000-dead" if made[0].id.hex[:4] != "0000" else "ffff-dead")
    with pytest.raises(InputError, match="not a resource request id or id prefix"):
        find_request(rm.requests, "abc")
