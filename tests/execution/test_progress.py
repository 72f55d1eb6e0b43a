"""Progress events: what the reporter tells its listeners, the run summary's counts, the text and
JSON renderings, and the events of a real run on an embedded store (in this process)."""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wharf import RetryConfig, pipeline, step
from wharf.config.global_config import load_config
from wharf.config.settings import ResourceSettings
from wharf.core.enums import ExecutionStatus, StepRuntime
from wharf.core.errors import InputError
from wharf.execution.lost_resources import reclaimed
from wharf.execution.progress import (
    PROGRESS_LOGGER,
    LogListener,
    ProgressEvent,
    ProgressReporter,
    describe_demands,
    format_duration,
)
from wharf.execution.progress_logging import JsonFormatter, TextFormatter, _configure
from wharf.sdk.workspace import Workspace
from wharf.store.models import PipelineRunRecord

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def run_record(status: ExecutionStatus, reason: str | None = None) -> PipelineRunRecord:
    return PipelineRunRecord.model_validate(
        {
            "id": uuid.uuid4(),
            "project_id": uuid.uuid4(),
            "pipeline_id": uuid.uuid4(),
            "snapshot_id": uuid.uuid4(),
            "user_id": None,
            "name": "train-1",
            "status": status,
            "status_reason": reason,
            "orchestrator_run_id": "local-1",
            "start_time": T0,
            "end_time": T0 + timedelta(seconds=75),
            "created": T0,
            "updated": T0,
        }
    )


def test_a_reporter_without_listeners_does_nothing():
    reporter = ProgressReporter()
    assert not reporter.active
    reporter.step_started(uuid.uuid4(), "a", StepRuntime.INLINE, 1, 1)  # no error, no output


def test_step_events_and_the_summary_of_a_run():
    events: list[ProgressEvent] = []
    reporter = ProgressReporter([events.append])
    run = run_record(ExecutionStatus.RUNNING)
    other = uuid.uuid4()
    reporter.run_started(run, "train")
    reporter.step_started(run.id, "load", StepRuntime.INLINE, 1, 1)
    reporter.step_ended(run.id, "load", ExecutionStatus.COMPLETED, None, T0, T0 + timedelta(1))
    reporter.step_cached(run.id, "prep", other)
    reporter.step_waiting(
        run.id,
        "train_0",
        ResourceSettings(cpu_count=2, memory="4GiB"),
        "Waiting for capacity: needs 2 CPU in class 'default' of pool 'local', 0 CPU free.",
    )
    reporter.step_started(run.id, "train_0", StepRuntime.ISOLATED, 1, 3)
    reporter.step_retrying(run.id, "train_0", 1, 3, "ValueError: nan loss\nTraceback ...", 2.0)
    reporter.step_started(run.id, "train_0", StepRuntime.ISOLATED, 2, 3)
    reporter.step_ended(run.id, "train_0", ExecutionStatus.FAILED, "KeyError: 'x'\nmore", T0, T0)
    ended = run_record(ExecutionStatus.FAILED, "Step(s) failed: train_0.")
    reporter.run_finished(ended.model_copy(update={"id": run.id}))

    messages = [e.message for e in events]
    assert messages == [
        "Run 'train-1' of pipeline 'train' started.",
        "Step 'load' started (inline).",
        "Step 'load' completed in 24 h 0 min.",
        f"Step 'prep' cached (from run {other.hex[:8]}).",
        "Step 'train_0' waiting for resources in pool 'local': 2 CPU, 4GiB memory (Waiting for "
        "capacity: needs 2 CPU in class 'default' of pool 'local', 0 CPU free.)",
        "Step 'train_0' started in its own process.",
        "Step 'train_0' attempt 1 of 3 failed, retrying in 2.00 s: ValueError: nan loss",
        "Step 'train_0' started (attempt 2 of 3, in its own process).",
        "Step 'train_0' failed in 0.00 s: KeyError: 'x'",
        "Run 'train-1' failed in 1 min 15 s: 1 completed, 1 cached, 1 failed, 1 retried. "
        "Step(s) failed: train_0.",
    ]
    assert all(e.run == "train-1" for e in events)
    summary = events[-1]
    assert summary.event == "run_finished" and summary.level == logging.ERROR
    assert summary.fields()["counts"] == {"completed": 1, "cached": 1, "failed": 1, "retried": 1}
    assert summary.duration_s == 75
    waiting = events[4].fields()
    assert waiting["event"] == "step_waiting" and waiting["pool"] == "local"
    assert events[6].level == logging.WARNING


def test_an_isolated_start_says_where_its_backend_runs_it():
    """A backend that says where an attempt runs (a Kubernetes Job) is named in the line; the
    placement is never given for an inline step."""
    events: list[ProgressEvent] = []
    reporter = ProgressReporter([events.append])
    run = run_record(ExecutionStatus.RUNNING)
    reporter.run_started(run, "train")
    where = "as Kubernetes Job wharf-train-ab12 (namespace ml)"
    reporter.step_started(run.id, "train", StepRuntime.ISOLATED, 1, 2, where)
    reporter.step_started(run.id, "train", StepRuntime.ISOLATED, 2, 2, where)
    reporter.step_started(run.id, "load", StepRuntime.INLINE, 1, 1, None)
    assert [e.message for e in events[1:]] == [
        "Step 'train' started as Kubernetes Job wharf-train-ab12 (namespace ml).",
        "Step 'train' started (attempt 2 of 2, as Kubernetes Job wharf-train-ab12 (namespace ml)).",
        "Step 'load' started (inline).",
    ]
    assert events[1].fields()["placement"] == where
    assert "placement" not in events[3].fields()


def test_a_reclaimed_attempt_is_told_cancelled_not_failed():
    """docs/resources.md: a reclaimed step ends cancelled, never failed."""
    events: list[ProgressEvent] = []
    reporter = ProgressReporter([events.append])
    run = run_record(ExecutionStatus.RUNNING)
    reporter.run_started(run, "train")
    why = reclaimed(uuid.UUID(int=1), "Preempted to free resources for request r: higher priority.")
    reporter.step_retrying(run.id, "a", 1, 2, f"Cancelling: {why}.", 0.0)
    assert events[-1].message == (
        "Step 'a' attempt 1 of 2 was cancelled, retrying: Cancelling: its resource request "
        "00000000-0000-0000-0000-000000000001 was reclaimed by the Resource Manager (Preempted "
        "to free resources for request r: higher priority)."
    )


def test_a_steps_end_is_told_once_and_never_after_the_summary():
    """A forced stop tells the ends it recorded; a waiter it left behind may tell its own end
    of the same step too, before or after the summary: counted and told once, before it."""
    events: list[ProgressEvent] = []
    reporter = ProgressReporter([events.append])
    run = run_record(ExecutionStatus.RUNNING)
    reporter.run_started(run, "train")
    reporter.step_ended(run.id, "a", ExecutionStatus.STOPPED, "killed by SIGKILL", T0, T0)
    reporter.step_ended(run.id, "a", ExecutionStatus.STOPPED, "Force-stopped on request.", T0, T0)
    reporter.step_ended(run.id, "b", ExecutionStatus.STOPPED, "Force-stopped on request.", T0, T0)
    reporter.run_finished(run_record(ExecutionStatus.STOPPED).model_copy(update={"id": run.id}))
    reporter.step_ended(run.id, "b", ExecutionStatus.STOPPED, "killed by SIGKILL", T0, T0)

    assert [e.message for e in events][1:] == [
        "Step 'a' stopped in 0.00 s: killed by SIGKILL",
        "Step 'b' stopped in 0.00 s: Force-stopped on request.",
        "Run 'train-1' stopped in 1 min 15 s: 2 stopped.",
    ]


def test_durations_and_demands_read_naturally():
    assert format_duration(0.123) == "0.12 s"
    assert format_duration(12.34) == "12.3 s"
    assert format_duration(125) == "2 min 5 s"
    assert format_duration(3 * 3600 + 60) == "3 h 1 min"
    settings = ResourceSettings(resources={"license": 1}, gpu_count=2, gpu_class="h100")
    assert describe_demands(settings) == "1 license, 2 h100 GPU"


def _record(event: ProgressEvent) -> logging.LogRecord:
    record = logging.LogRecord(
        PROGRESS_LOGGER, event.level, __file__, 1, "%s", (event.message,), None
    )
    record.wharf_event = event
    return record


def test_text_and_json_renderings():
    events: list[ProgressEvent] = []
    reporter = ProgressReporter([events.append])
    run_id = uuid.uuid4()
    reporter.step_ended(run_id, "a", ExecutionStatus.FAILED, "ValueError: no", T0, T0)
    text = TextFormatter().format(_record(events[0]))
    assert text.endswith(" [wharf] ERROR: Step 'a' failed in 0.00 s: ValueError: no")
    data = json.loads(JsonFormatter().format(_record(events[0])))
    assert data["event"] == "step_failed"
    assert data["run_id"] == str(run_id)
    assert data["step"] == "a" and data["status"] == "failed" and data["duration_s"] == 0
    assert data["reason"] == "ValueError: no" and data["level"] == "ERROR"


def test_the_logging_verbosity_and_format_are_validated(tmp_path: Path):
    config = load_config({"WHARF_LOGGING_VERBOSITY": "warning"}, home=tmp_path)
    assert config.logging_verbosity == "WARNING" and config.logging_format == "text"
    assert load_config({"WHARF_LOGGING_FORMAT": "JSON"}, home=tmp_path).logging_format == "json"
    with pytest.raises(InputError, match="WHARF_LOGGING_VERBOSITY must be one of DEBUG"):
        load_config({"WHARF_LOGGING_VERBOSITY": "loud"}, home=tmp_path)
    with pytest.raises(InputError, match="WHARF_LOGGING_FORMAT must be one of text, json"):
        load_config({"WHARF_LOGGING_FORMAT": "xml"}, home=tmp_path)


@step
def _one() -> int:
    return 1


@step
def _boom(x: int) -> int:
    raise ValueError("boom\nsecond line")


_tries: list[int] = []


@step(retry=RetryConfig(max_retries=1))
def _flaky(x: int) -> int:
    _tries.append(x)
    if len(_tries) == 1:
        raise RuntimeError("first try fails")
    return x


def test_a_run_logs_its_progress_on_the_wharf_progress_logger(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    @pipeline(execution_mode="continue_on_failure")
    def p() -> None:
        x = _one()
        _flaky(x)
        _boom(x)

    caplog.set_level(logging.INFO, logger=PROGRESS_LOGGER)
    workspace = Workspace.open(load_config({}, home=tmp_path / "home"))
    try:
        for _ in range(2):
            with contextlib.suppress(Exception):  # the run fails (and may raise): step '_boom'
                p.run_in(workspace)
    finally:
        workspace.close()
    events = [
        r.wharf_event
        for r in caplog.records
        if isinstance(getattr(r, "wharf_event", None), ProgressEvent)
    ]
    first, second = (e for e in events if e.event == "run_started")
    by_run = {
        run.run_id: [(e.event, e.step) for e in events if e.run_id == run.run_id]
        for run in (first, second)
    }
    assert ("step_completed", "_one") in by_run[first.run_id]
    assert ("step_retrying", "_flaky") in by_run[first.run_id]
    assert ("step_failed", "_boom") in by_run[first.run_id]
    assert by_run[first.run_id][0] == ("run_started", None)
    assert by_run[first.run_id][-1] == ("run_finished", None)
    assert ("step_cached", "_one") in by_run[second.run_id]
    cached = next(e for e in events if e.run_id == second.run_id and e.step == "_one")
    assert cached.details["from_run_id"] == str(first.run_id)
    summary = next(e for e in events if e.run_id == first.run_id and e.event == "run_finished")
    assert summary.fields()["counts"] == {"completed": 2, "failed": 1, "retried": 1}


def test_events_nobody_wants_are_counted_but_not_told(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger=PROGRESS_LOGGER)
    errors: list[ProgressEvent] = []

    class ErrorsOnly:
        def wants(self, level: int) -> bool:
            return level >= logging.ERROR

        def __call__(self, event: ProgressEvent) -> None:
            errors.append(event)

    reporter = ProgressReporter([LogListener(), ErrorsOnly()])
    run = run_record(ExecutionStatus.RUNNING)
    reporter.run_started(run, "train")
    reporter.step_started(run.id, "a", StepRuntime.INLINE, 1, 1)
    reporter.step_ended(run.id, "a", ExecutionStatus.COMPLETED)
    reporter.step_ended(run.id, "b", ExecutionStatus.FAILED, "boom")
    reporter.run_finished(run_record(ExecutionStatus.FAILED).model_copy(update={"id": run.id}))
    expected = [
        "Step 'b' failed: boom",
        "Run 'train-1' failed in 1 min 15 s: 1 completed, 1 failed.",
    ]
    assert [r.getMessage() for r in caplog.records] == expected
    assert [e.message for e in errors] == expected


def test_wharf_adds_its_handler_only_while_the_application_configured_none(
    monkeypatch: pytest.MonkeyPatch,
):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    wharf = logging.Logger("wharf-under-test")
    _configure(wharf, None, "json")
    (handler,) = wharf.handlers
    assert isinstance(handler.formatter, JsonFormatter) and wharf.level == logging.INFO
    _configure(wharf, "WARNING", "text")  # the next run: the same handler, as now configured
    assert wharf.handlers == [handler] and isinstance(handler.formatter, TextFormatter)
    assert wharf.level == logging.WARNING
    monkeypatch.setattr(root, "handlers", [logging.NullHandler()])  # the application's own
    _configure(wharf, None, "text")
    assert wharf.handlers == [] and wharf.level == logging.NOTSET
    app = logging.NullHandler()
    wharf.addHandler(app)
    monkeypatch.setattr(root, "handlers", [])
    _configure(wharf, "ERROR", "text")  # a handler on 'wharf' is the application's choice too
    assert wharf.handlers == [app] and wharf.level == logging.ERROR
