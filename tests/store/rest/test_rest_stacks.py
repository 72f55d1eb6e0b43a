"""The store contract's ``test_stacks`` over REST (see ``conftest.py``).

The server refuses a component of a flavor it does not declare, so the contract's opaque flavor
is declared here: by a distribution on ``sys.path`` whose class cannot be imported, as a flavor
installed where its stacks run but not on the server is (stored with its configuration
unchecked)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.contract.test_stacks import *  # noqa: F403
from tests.store.contract.test_stacks import OPAQUE_FLAVOR


@pytest.fixture(autouse=True)
def _opaque_flavor_declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    info = tmp_path / "declared" / "wharf_opaque_flavor-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wharf-opaque-flavor\nVersion: 0\n")
    points = "\n".join(
        f"{type}.{OPAQUE_FLAVOR} = wharf_opaque_flavor_not_installed:Component"
        for type in ("orchestrator", "artifact_store", "step_operator")
    )
    (info / "entry_points.txt").write_text(f"[wharf.flavors]\n{points}\n")
    monkeypatch.syspath_prepend(str(info.parent))  # the flavor scan is cached per sys.path
    yield
