"""``wharf pool | policy | request`` on the embedded RM, as real subprocesses: what they refuse
before doing anything (an unknown name before asking to confirm or listing, flags that contradict
each other, a Resource Manager mode that does not exist), each as one line on stderr."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.cli.terminal import answered
from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import ok, run
from wharf.config.global_config import load_config
from wharf.resource_manager.contract.models import PoolCreate
from wharf.resource_manager.embedded.connect import connect_embedded
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.store.defaults import DEFAULT_USER


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    values["WHARF_HOME"] = str(tmp_path / "home")
    return values


@contextmanager
def embedded_rm(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[InProcessResourceManager]:
    """The embedded RM the commands run with ``env`` open, for a test's setup and checks (what
    the commands themselves do is asserted through the commands)."""
    monkeypatch.setenv("WHARF_HOME", env["WHARF_HOME"])
    config = load_config()
    rm = connect_embedded(config.store_url, DEFAULT_USER, config.local_step_slots)
    try:
        yield rm
    finally:
        rm.close()


@pytest.mark.parametrize("entity", ["pool", "policy"])
def test_deleting_an_unknown_name_says_so_before_asking(entity: str, env: dict[str, str]) -> None:
    result = run(entity, "delete", "nope", env=env, stdin="y\n")
    assert_one_line_error(result, f"Resource {entity} 'nope' not found")
    assert "Delete" not in result.stdout  # no confirmation was asked


def test_a_known_pool_is_still_confirmed_before_deletion(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = {"name": "gpus", "classes": [{"name": "a100", "capacity": {"GPU": 2}}]}
    with embedded_rm(env, monkeypatch) as rm:
        rm.pools.create(PoolCreate.model_validate(pool))
    unasked = run("pool", "delete", "gpus", env=env, stdin="y\n")  # no terminal to ask on
    assert_one_line_error(unasked, "there is no terminal to answer on; add --yes to confirm")
    declined = answered("n", "pool", "delete", "gpus", env=env)
    assert "Delete pool 'gpus' and its policies?" in declined.stdout
    assert declined.returncode != 0
    with embedded_rm(env, monkeypatch) as rm:
        assert "gpus" in [p.name for p in rm.pools.list()]
    assert "Deleted pool 'gpus'" in answered("y", "pool", "delete", "gpus", env=env).stdout


def test_a_priority_with_the_priority_lane_is_refused(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lane is served before every priority: the priority was stored and never used."""
    create = ("policy", "create", "p", "--pool", "local", "--subject-type", "account")
    refused = run(*create, "--priority-lane", "--priority", "5", env=env)
    assert_one_line_error(refused, "Priority 5 has no effect in the priority lane")
    path = tmp_path / "p.yaml"
    path.write_text("priority: 5\n")
    assert_one_line_error(
        run(*create, "-f", str(path), "--priority-lane", env=env), "Priority 5 has no effect"
    )
    with embedded_rm(env, monkeypatch) as rm:
        assert "p" not in [p.name for p in rm.policies.list()]
    shown = json.loads(ok(*create, "--priority-lane", "-o", "json", env=env))
    assert shown["priority_lane"] is True and shown["priority"] == 0
    # a priority given alone to a policy in the lane is refused too (it was stored, unused)
    assert_one_line_error(
        run("policy", "update", "p", "--priority", "5", env=env),
        "Policy 'p' is in the priority lane",
    )
    with embedded_rm(env, monkeypatch) as rm:
        assert next(p for p in rm.policies.list() if p.name == "p").priority == 0
    moved = json.loads(
        ok("policy", "update", "p", "--no-priority-lane", "--priority", "5", "-o", "json", env=env)
    )
    assert (moved["priority_lane"], moved["priority"]) == (False, 5)


def test_an_unknown_resource_manager_mode_is_refused(env: dict[str, str]) -> None:
    """As a pipeline run refuses it (the CLI used the embedded RM whatever the mode said)."""
    env["WHARF_RESOURCE_MANAGER"] = "bogus"
    assert_one_line_error(
        run("pool", "list", env=env), "Unknown Resource Manager mode 'bogus'; known: embedded"
    )


def test_a_url_given_as_the_resource_manager_mode_is_refused_without_its_password(
    env: dict[str, str],
) -> None:
    env["WHARF_RESOURCE_MANAGER"] = "http://ops:hunter2@rm.example:8238"
    refused = run("pool", "list", env=env)
    assert_one_line_error(
        refused, "Unknown Resource Manager mode 'http://ops:***@rm.example:8238'; known:"
    )
    assert "hunter2" not in refused.stdout + refused.stderr


def test_an_rm_url_without_a_credential_is_refused_without_the_url_s_password(
    env: dict[str, str],
) -> None:
    env["WHARF_RM_URL"] = "http://ops:hunter2@127.0.0.1:9"
    refused = run("pool", "list", env=env)
    assert_one_line_error(
        refused, "The Resource Manager at http://ops:***@127.0.0.1:9 needs a credential"
    )
    assert "hunter2" not in refused.stdout + refused.stderr


def test_request_list_says_an_unknown_pool_or_project_is_not_found(env: dict[str, str]) -> None:
    """As ``policy list --pool`` and ``runs list --pipeline`` do, rather than an empty list."""
    unknown_pool = run("request", "list", "--pool", "nosuch", env=env)
    assert_one_line_error(unknown_pool, "Pool 'nosuch' not found.")
    misspelt = run("request", "list", "--pool", "lcal", env=env)
    assert_one_line_error(misspelt, "Pool 'lcal' not found; did you mean 'local'?")
    unknown_project = run("request", "list", "--project", "nosuch", env=env)
    assert_one_line_error(unknown_project, "Project 'nosuch' not found.")
    misspelt = run("request", "list", "--project", "defualt", env=env)
    assert_one_line_error(misspelt, "Project 'defualt' not found; did you mean 'default'?")
    # the default project exists before its first run: listed, not refused
    assert "STATUS" in ok("request", "list", "--pool", "local", "--project", "default", env=env)


@pytest.mark.parametrize(("entity", "name"), [("pool", "local"), ("policy", "local-default")])
def test_the_embedded_local_pool_and_policy_are_not_deleted(
    entity: str, name: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each was said deleted (exit 0) and made again by the next command, with a new id and an
    edit of the pool lost (the QA pass)."""
    ok("pool", "update", "local", "--concurrency-limit", "7", env=env)
    with embedded_rm(env, monkeypatch) as rm:
        pool_id = rm.pools.get("local").id
    result = run(entity, "delete", name, "--yes", env=env)
    assert_one_line_error(result, f"The {entity} '{name}' describes this machine")
    assert f"`wharf {entity} update {name}`" in result.stderr
    with embedded_rm(env, monkeypatch) as rm:
        pool = rm.pools.get("local")
        assert (pool.id, pool.concurrency_limit) == (pool_id, 7)
        assert "local-default" in [p.name for p in rm.policies.list()]
