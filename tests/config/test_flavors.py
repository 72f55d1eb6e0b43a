"""The flavor registry: ``wharf.flavors`` entry points, Wharf's own and a third party's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.config.flavor_dist import TINY_MODULE, tiny_distribution, write_distribution
from tests.import_probe import loaded_after
from wharf.config.flavors import declared_flavors, flavor_class, known_flavors
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError, WharfError
from wharf.orchestrators.local import LocalOrchestrator

ORCH = ComponentType.ORCHESTRATOR
OP = ComponentType.STEP_OPERATOR


def test_wharf_declares_its_own_flavors() -> None:
    assert known_flavors(ORCH) == ["kubernetes", "local", "local_process"]
    assert known_flavors(ComponentType.ARTIFACT_STORE) == ["fsspec", "local"]
    assert known_flavors(OP) == ["kubernetes", "local_process"]
    assert flavor_class(ORCH, "local") is LocalOrchestrator


def test_reading_the_flavors_imports_none_of_them() -> None:
    code = "from wharf.config.flavors import declared_flavors\nassert declared_flavors()\n"
    watched = ["wharf.orchestrators", "wharf.step_operators", "wharf.artifacts"]
    assert loaded_after(code, watched) == []


def test_unknown_flavor_is_one_line_naming_the_known_ones_of_that_type() -> None:
    with pytest.raises(InputError) as raised:
        flavor_class(OP, "slurm")
    assert (
        str(raised.value)
        == "Unknown step_operator flavor 'slurm'; known: kubernetes, local_process."
    )


def test_a_third_party_distribution_adds_flavors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "tiny" not in known_flavors(ORCH)
    monkeypatch.delitem(sys.modules, TINY_MODULE, raising=False)  # another test may load it
    monkeypatch.syspath_prepend(str(tiny_distribution(tmp_path / "site")))
    assert known_flavors(ORCH) == ["kubernetes", "local", "local_process", "tiny"]
    assert known_flavors(OP) == ["kubernetes", "local_process", "tiny"]
    assert TINY_MODULE not in sys.modules  # declared, not imported
    orchestrator = flavor_class(ORCH, "tiny")
    assert (orchestrator.__module__, orchestrator.__name__) == (TINY_MODULE, "TinyOrchestrator")
    assert issubclass(orchestrator, LocalOrchestrator)
    with pytest.raises(InputError, match=r"known: kubernetes, local, local_process, tiny\.$"):
        flavor_class(ORCH, "nope")


def test_names_that_are_not_type_dot_flavor_are_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = write_distribution(
        tmp_path / "site",
        "odd_flavors",
        {
            "local": "odd:Thing",
            "gpu.fast": "odd:Thing",
            "orchestrator.": "odd:Thing",
            "orchestrator.odd": "odd:Thing",
        },
        {"odd": "class Thing:\n    pass\n"},
    )
    monkeypatch.syspath_prepend(str(site))
    flavors = declared_flavors()
    assert sorted(flavors[ORCH]) == ["kubernetes", "local", "local_process", "odd"]
    assert flavors[ORCH]["local"].value == "wharf.orchestrators.local:LocalOrchestrator"
    assert set(flavors) == set(ComponentType)


def test_a_flavor_that_cannot_be_imported_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = write_distribution(
        tmp_path / "site",
        "broken_flavors",
        {"orchestrator.gone": "no_such_module:Orchestrator", "orchestrator.typo": "typo:Orch"},
        {"typo": "class Orchestrator:\n    pass\n"},
    )
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(WharfError) as raised:
        flavor_class(ORCH, "gone")
    message = str(raised.value)
    assert message.startswith("The orchestrator flavor 'gone' (no_such_module:Orchestrator)")
    assert "no_such_module" in message and "\n" not in message
    with pytest.raises(WharfError, match=r"flavor 'typo' \(typo:Orch\) cannot be loaded"):
        flavor_class(ORCH, "typo")


def test_wharf_run_from_its_sources_without_installing_says_so() -> None:
    """No distribution declares a flavor (Wharf's sources on the path, nothing installed)."""
    src = Path(__file__).parents[2] / "src"
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(src)!r})\n"
        "from wharf.config.flavors import flavor_class\n"
        "from wharf.core.enums import ComponentType\n"
        "flavor_class(ComponentType.ORCHESTRATOR, 'local')\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "Unknown orchestrator flavor 'local'; known: none. No 'wharf.flavors' entry points" in (
        result.stderr
    )
