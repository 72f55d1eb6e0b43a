"""``wharf request show|explain|release|cancel`` take a request's id or an id prefix, as the
other show commands take theirs (embedded mode, the real CLI in a subprocess)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_cli import wharf


def _create(demands: list[dict[str, object]]) -> str:
    from wharf.config.global_config import load_config
    from wharf.resource_manager.contract.models import ResourceRequestCreate
    from wharf.sdk.client import Client

    body = {
        "subjects": [{"nodes": [{"subject_type": "account", "subject_id": "default"}]}],
        "demands": demands,
        "lease_seconds": 600,
    }
    with Client(load_config()) as client:
        made = client.resource_manager.requests.create(ResourceRequestCreate.model_validate(body))
    return str(made.id)


def test_request_commands_take_an_id_prefix(home: Path) -> None:
    made = _create([{"kind": "cpu", "quantity": 1, "unit": "CPU"}])
    prefix = made.replace("-", "")[:8]
    shown = wharf("request", "show", prefix)
    assert shown.returncode == 0, shown.stderr
    assert made in shown.stdout
    explained = wharf("request", "explain", prefix)
    assert explained.returncode == 0, explained.stderr
    released = wharf("request", "release", prefix)
    assert released.returncode == 0, released.stderr
    assert released.stdout.startswith(f"Request {made}: ")
    again = wharf("request", "release", prefix)
    assert again.returncode != 0 and "already finished" in again.stderr
    unknown = wharf("request", "show", "0000dead" if not prefix.startswith("0000") else "ffffdead")
    assert unknown.returncode != 0
    assert unknown.stderr.count("\n") == 1 and "Traceback" not in unknown.stderr
