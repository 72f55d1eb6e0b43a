"""A step process's environment holds exactly the Wharf settings its parent chose."""

from __future__ import annotations

from wharf.execution.subprocesses import step_environment


def test_inherited_wharf_settings_never_leak_into_a_step_process() -> None:
    inherited = {
        "PATH": "/usr/bin",
        "WHARF_SERVER_URL": "http://127.0.0.1:1",  # e.g. left in the fork server's environment
        "WHARF_API_KEY": "someone-elses-token",
        "WHARF_STORE_URL": "sqlite:///other.db",
    }
    child = {"WHARF_STORE_URL": "sqlite:///run.db", "WHARF_HOME": "/home"}
    environment = step_environment(inherited, child)
    assert environment == {
        "PATH": "/usr/bin",
        "WHARF_STORE_URL": "sqlite:///run.db",
        "WHARF_HOME": "/home",
        "PYTHONUNBUFFERED": "1",
    }
