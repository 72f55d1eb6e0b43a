# ruff: noqa: F811  (the refused fixture, imported)
"""A Wharf server or Resource Manager URL with a query string (``https://host/prefix?x=1``) is
refused with one line naming it, its secret values masked, wherever it is given: ``wharf
login``, ``WHARF_SERVER_URL``, the config file, ``--rm-url``. (``httpx`` puts each request's
route after the query: every call would reach ``/prefix``.) Real ``wharf`` processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli.test_cli import assert_one_line_error
from tests.cli.test_rm_cli import run
from tests.cli.test_url_secrets import _env, refused  # noqa: F401 (fixture)

SECRET = "S3cretTok"
REFUSAL = "cannot have a query string"


def _refused(result: subprocess.CompletedProcess[str], shown: str) -> None:
    assert_one_line_error(result, shown)
    assert REFUSAL in result.stderr
    assert SECRET not in result.stdout + result.stderr


def test_login_refuses_a_query_string_before_prompting(tmp_path: Path, refused: str) -> None:
    url = f"{refused}/prefix?team=ml&token={SECRET}"
    result = run("login", url, env=_env(tmp_path))  # no input: a prompt would abort
    _refused(result, f"Invalid Wharf server URL '{refused}/prefix?team=ml&token=***'")
    assert "Username" not in result.stdout
    assert not (tmp_path / "home" / "config.json").exists()


def test_a_server_url_from_the_environment_or_the_config_file_is_refused(
    tmp_path: Path, refused: str
) -> None:
    url = f"{refused}/prefix?api_key={SECRET}"
    shown = f"Invalid Wharf server URL '{refused}/prefix?api_key=***'"
    env = _env(tmp_path, WHARF_SERVER_URL=url, WHARF_API_KEY="k" * 20)
    _refused(run("runs", "list", env=env), shown)

    home = tmp_path / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "config.json").write_text(json.dumps({"server_url": url, "api_key": "k" * 20}))
    (home / "config.json").chmod(0o600)
    _refused(run("runs", "list", env=_env(tmp_path)), shown)


def test_a_resource_manager_url_with_a_query_string_is_refused(
    tmp_path: Path, refused: str
) -> None:
    url = f"{refused}/rm?sig={SECRET}"
    shown = f"Invalid Resource Manager URL '{refused}/rm?sig=***'"
    result = run("pool", "list", "--rm-url", url, "--api-key", "k" * 20, env=_env(tmp_path))
    _refused(result, shown)
    env = _env(tmp_path, WHARF_RM_URL=f"{refused}/rm?", WHARF_RM_API_KEY="k" * 20)
    _refused(run("policy", "list", env=env), f"Invalid Resource Manager URL '{refused}/rm?'")
