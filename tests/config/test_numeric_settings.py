"""The numeric settings (``WHARF_HEARTBEAT_INTERVAL``, ``WHARF_LOCAL_STEP_SLOTS``,
``WHARF_CODE_ARCHIVE_LIMIT_MIB``, or their keys in the config file) are refused where the
configuration is loaded when they are NaN, infinite, too large for what they feed, or not
positive: in one line naming the variable and the range, from the ``wharf`` command (a real
process) and from a pipeline call, never as a traceback from deeper down."""

from __future__ import annotations

import math
from pathlib import Path

import annotated_types
import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from wharf.config.global_config import LARGEST_LOCAL_STEP_SLOTS, load_config
from wharf.config.liveness import (
    LONGEST_HEARTBEAT_INTERVAL_SECONDS,
    LONGEST_INTERVAL_THE_STORE_TAKES,
    LONGEST_LIVENESS_WINDOW_SECONDS,
    LONGEST_POLL_SECONDS,
    SHORTEST_HEARTBEAT_INTERVAL_SECONDS,
)
from wharf.core.errors import InputError

INTERVAL_RANGE = "a finite number of seconds between 0.1 and 2147483.647"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh embedded home (``WHARF_HOME``) in the environment, as a ``wharf`` process and a
    pipeline call read it; no store, server or setting from the outer environment."""
    home = tmp_path / "home"
    monkeypatch.setenv("WHARF_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    for name in (
        "WHARF_STORE_URL",
        "WHARF_SERVER_URL",
        "WHARF_ARTIFACT_ROOT",
        "WHARF_ACTIVE_STACK",
        "WHARF_HEARTBEAT_INTERVAL",
        "WHARF_LOCAL_STEP_SLOTS",
        "WHARF_CODE_ARCHIVE_LIMIT_MIB",
    ):
        monkeypatch.delenv(name, raising=False)
    return home


def refusal(home: Path, environ: dict[str, str]) -> str:
    with pytest.raises(InputError) as caught:
        load_config({"WHARF_HOME": str(home), **environ})
    return str(caught.value)


@pytest.mark.parametrize(
    "value",
    ["inf", "-inf", "nan", "NaN", "1e300", "10000000", "3000000", "0", "-5", "1e-9", "0.0999"],
)
def test_a_heartbeat_interval_out_of_range_is_refused_naming_the_range(
    home: Path, value: str
) -> None:
    message = refusal(home, {"WHARF_HEARTBEAT_INTERVAL": value})
    assert message == f"WHARF_HEARTBEAT_INTERVAL must be {INTERVAL_RANGE}, not '{value}'."


def test_the_longest_interval_is_the_largest_taken(home: Path) -> None:
    longest = LONGEST_HEARTBEAT_INTERVAL_SECONDS
    environ = {"WHARF_HOME": str(home), "WHARF_HEARTBEAT_INTERVAL": repr(longest)}
    assert load_config(environ).heartbeat_interval == longest
    just_over = repr(math.nextafter(longest, math.inf))
    assert "must be" in refusal(home, {"WHARF_HEARTBEAT_INTERVAL": just_over})


def test_the_shortest_interval_is_the_smallest_taken(home: Path) -> None:
    """A shorter beat only loads the store: every running step would write in a loop."""
    shortest = SHORTEST_HEARTBEAT_INTERVAL_SECONDS
    environ = {"WHARF_HOME": str(home), "WHARF_HEARTBEAT_INTERVAL": repr(shortest)}
    assert load_config(environ).heartbeat_interval == shortest
    just_under = repr(math.nextafter(shortest, 0))
    assert "must be" in refusal(home, {"WHARF_HEARTBEAT_INTERVAL": just_under})


def test_every_window_the_longest_interval_sends_fits_the_store() -> None:
    # The store's limit is what a run's orchestrator record takes, and a run's first window
    # (its creation's) is the longest window it sends.
    from pydantic import ValidationError

    from wharf.execution.run_heartbeat import creating_process, orchestrator_process
    from wharf.store.models import OrchestratorProcess

    (limit,) = (
        m.le
        for m in OrchestratorProcess.model_fields["liveness_timeout_seconds"].metadata
        if isinstance(m, annotated_types.Le)
    )
    assert limit == LONGEST_LIVENESS_WINDOW_SECONDS
    longest = LONGEST_INTERVAL_THE_STORE_TAKES
    assert longest >= LONGEST_HEARTBEAT_INTERVAL_SECONDS
    for process in (orchestrator_process(longest), creating_process(longest)):
        # as the workspace server reads it from a request body
        OrchestratorProcess.model_validate(process.model_dump(mode="json"))
    over = creating_process(math.nextafter(longest, math.inf)).model_dump(mode="json")
    with pytest.raises(ValidationError):
        OrchestratorProcess.model_validate(over)


def test_a_wait_of_the_longest_interval_is_one_a_selector_takes() -> None:
    # A run's heartbeat waits for its next beat on a selector (to be woken by a stop); one
    # past the poll limit raised OverflowError in that thread, and the run beat no more.
    import selectors
    import socket

    assert LONGEST_HEARTBEAT_INTERVAL_SECONDS <= LONGEST_POLL_SECONDS
    left, right = socket.socketpair()
    with selectors.DefaultSelector() as selector, left, right:
        right.send(b"w")  # ready at once: the select returns without waiting
        selector.register(left, selectors.EVENT_READ)
        assert selector.select(LONGEST_POLL_SECONDS)
        with pytest.raises(OverflowError):
            selector.select(math.nextafter(LONGEST_POLL_SECONDS, math.inf))


@pytest.mark.parametrize(
    ("key", "text", "shown"),
    [
        ("heartbeat_interval", "Infinity", "inf"),
        ("heartbeat_interval", "NaN", "nan"),
        ("heartbeat_interval", "true", "True"),
        ("code_archive_limit_mib", "Infinity", "inf"),
        ("code_archive_limit_mib", "NaN", "nan"),
        ("local_step_slots", "Infinity", "inf"),
        ("local_step_slots", "NaN", "nan"),
        ("local_step_slots", "2.5", "2.5"),
        ("local_step_slots", "true", "True"),
        ("local_step_slots", "99999999999", "99999999999"),
    ],
)
def test_a_config_file_value_out_of_range_is_refused_naming_the_file(
    home: Path, key: str, text: str, shown: str
) -> None:
    # JSON as Python writes it (``json.dumps(math.inf)`` is ``Infinity``), read by json.loads
    home.mkdir(mode=0o700)
    path = home / "config.json"
    path.write_text(f'{{"{key}": {text}}}')
    path.chmod(0o600)
    message = refusal(home, {})
    assert message.startswith(f"'{key}' in {path} must be "), message
    assert message.endswith(f", not '{shown}'."), message


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1"])
def test_a_code_archive_limit_out_of_range_is_refused(home: Path, value: str) -> None:
    message = refusal(home, {"WHARF_CODE_ARCHIVE_LIMIT_MIB": value})
    expected = f"must be a finite number of MiB greater than 0, not '{value}'."
    assert message == f"WHARF_CODE_ARCHIVE_LIMIT_MIB {expected}"


@pytest.mark.parametrize("value", ["0", "2147483648", "99999999999", "1e3", "2.0"])
def test_local_step_slots_out_of_range_are_refused(home: Path, value: str) -> None:
    message = refusal(home, {"WHARF_LOCAL_STEP_SLOTS": value})
    expected = f"must be a whole number from 1 to {LARGEST_LOCAL_STEP_SLOTS}, not '{value}'."
    assert message == f"WHARF_LOCAL_STEP_SLOTS {expected}"


def test_the_largest_step_slots_is_what_the_resource_manager_stores(home: Path) -> None:
    from wharf.resource_manager.domain.pools import MAX_STORED_INT

    assert LARGEST_LOCAL_STEP_SLOTS == MAX_STORED_INT
    environ = {"WHARF_HOME": str(home), "WHARF_LOCAL_STEP_SLOTS": str(MAX_STORED_INT)}
    assert load_config(environ).local_step_slots == MAX_STORED_INT
    assert load_config({**environ, "WHARF_LOCAL_STEP_SLOTS": " 3 "}).local_step_slots == 3


def test_the_cli_refuses_a_nan_interval_in_one_line(home: Path) -> None:
    # it exited 0, the NaN taken as an interval
    result = wharf("runs", "list", env={"WHARF_HEARTBEAT_INTERVAL": "nan"})
    assert_one_line_error(
        result, f"Error: WHARF_HEARTBEAT_INTERVAL must be {INTERVAL_RANGE}, not 'nan'."
    )


def test_the_cli_refuses_too_many_step_slots_naming_the_variable(home: Path) -> None:
    # the Resource Manager refused the local pool, naming its concurrency_limit, not the variable
    result = wharf("pool", "list", env={"WHARF_LOCAL_STEP_SLOTS": "99999999999"})
    assert_one_line_error(result, "Error: WHARF_LOCAL_STEP_SLOTS must be a whole number from 1")


def run_a_pipeline() -> None:
    from wharf import pipeline, step

    @step(enable_cache=False)
    def produce() -> int:
        return 42

    @pipeline(name="numeric_settings")
    def numeric_settings() -> None:
        produce()

    numeric_settings()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WHARF_HEARTBEAT_INTERVAL", "inf"),  # the store's model refused the liveness timeout
        ("WHARF_HEARTBEAT_INTERVAL", "10000000"),
        ("WHARF_CODE_ARCHIVE_LIMIT_MIB", "nan"),  # int(nan) failed packaging the code
    ],
)
def test_a_pipeline_call_refuses_the_setting_as_input(
    home: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(
        InputError, match=rf"^{name} must be a finite number of \w+ (greater|between)"
    ):
        run_a_pipeline()


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_pipeline_runs_with_the_longest_interval(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wharf import Client

    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", repr(LONGEST_HEARTBEAT_INTERVAL_SECONDS))
    run_a_pipeline()
    with Client() as client:
        (run,) = client.list_pipeline_runs().items
        assert run.status.value == "completed", run.status_reason
