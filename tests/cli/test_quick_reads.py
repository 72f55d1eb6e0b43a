"""The CLI's quick SQLite reads (``wharf.cli.quick_reads``) answer exactly as the normal store
does through ``Client``, and step aside wherever the normal store must act."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FakeClock
from tests.import_probe import loaded_after
from wharf.cli.quick_reads import DEFAULT_PROJECT, SCHEMA_REVISION, QuickReadError, QuickReads
from wharf.cli.reads import Reads, read
from wharf.config.global_config import WharfConfig, load_config
from wharf.config.spec import PipelineSpec, StepSpec
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import (
    AmbiguousIdError,
    EntityNotFoundError,
    InputError,
    SchemaVersionError,
)
from wharf.sdk.client import Client
from wharf.store import defaults
from wharf.store.models import (
    ArtifactVersionCreate,
    RunCreate,
    RunUpdate,
    SnapshotCreate,
    SnapshotRecord,
    StepRunCreate,
    StepRunUpdate,
)
from wharf.store.sql import SqlStore
from wharf.store.sql.schema import HEAD_REVISION

PAGES = [(1, 50), (1, 1), (1, 3), (2, 3), (3, 3), (4, 3), (9, 3), (1, 1000)]
FEW_PAGES = [(1, 50), (1, 2), (2, 2)]


def config_for(home: Path, project: str | None = None, **overrides: Any) -> WharfConfig:
    return load_config(environ={}, home=home, project=project, **overrides)


def fill(store: SqlStore, clock: FakeClock) -> None:
    """Two projects; runs of several pipelines and statuses (some created at one instant, some
    sharing a name); steps with parameters, specs, links, retries and a cached step; artifacts
    with several versions."""
    user, project = defaults.ensure_defaults(store)
    other = store.projects.create("other")

    def snapshot(project_id: uuid.UUID, name: str) -> SnapshotRecord:
        pipeline = store.pipelines.get_or_create(project_id, name)
        spec = PipelineSpec(name=name)
        return store.snapshots.create(
            SnapshotCreate(project_id=project_id, pipeline_id=pipeline.id, spec=spec)
        )

    train, evaluate, elsewhere = (
        snapshot(project.id, "train"),
        snapshot(project.id, "evaluate"),
        snapshot(other.id, "train"),
    )

    def run(snap: SnapshotRecord, name: str, *statuses: S) -> uuid.UUID:
        record = store.runs.create(
            RunCreate(
                project_id=snap.project_id,
                pipeline_id=snap.pipeline_id,
                snapshot_id=snap.id,
                name=name,
                status=statuses[0],
                user_id=user.id,
                orchestrator_run_id=f"o-{uuid.uuid4().hex[:6]}",
            )
        )
        for status in statuses[1:]:
            store.runs.update(record.id, RunUpdate(status=status, status_reason=f"{status}!"))
        return record.id

    def version(name: str, project_id: uuid.UUID = project.id, **more: Any) -> uuid.UUID:
        create = ArtifactVersionCreate(
            project_id=project_id,
            name=name,
            uri=f"/artifacts/{name}/{uuid.uuid4().hex}",
            data_type="builtins.dict",
            materializer="wharf.artifacts.materializers:Json",
            **more,
        )
        return store.artifacts.create_version(create).id

    run(train, "nightly", S.RUNNING, S.COMPLETED)
    run(evaluate, "eval-1", S.INITIALIZING)
    clock.tick = timedelta(0)  # created at one instant: the order falls back to the ids
    for i in range(4):
        run(train if i % 2 else evaluate, f"tied-{i}", S.RUNNING, S.FAILED)
    clock.tick = timedelta(milliseconds=1)
    run(evaluate, "nightly", S.RUNNING, S.STOPPING, S.STOPPED)  # newer, same name
    run(train, "queued", S.QUEUED)
    run(elsewhere, "nightly", S.RUNNING)
    version("data", other.id)

    with_steps = run(train, "with-steps", S.RUNNING)
    data = version("data")
    spec = StepSpec(name="load", source="pkg.steps:load", code_hash="h1", parameters={"n": 3})
    load = store.steps.create(
        StepRunCreate(
            run_id=with_steps,
            name="load",
            status=S.RUNNING,
            parameters={"n": 3, "path": "x", "nested": {"b": [1, 2], "a": None}},
            inputs={"raw": data},
            spec=spec,
            cache_key="k-load",
            code_hash="h1",
            source_code="def load(): ...",
            docstring="Load.",
        )
    )
    outs = {name: version("data", producer_step_run_id=load.id) for name in ("b", "a", "c")}
    store.steps.update(
        load.id, StepRunUpdate(status=S.COMPLETED, outputs=outs, pid=4321, logs_uri="/l/1")
    )
    train_inputs = {"zeta": outs["b"], "alpha": outs["a"], "mid": data}
    first = store.steps.create(
        StepRunCreate(run_id=with_steps, name="train", status=S.RUNNING, inputs=train_inputs)
    )
    store.steps.update(first.id, StepRunUpdate(status=S.RETRYING, status_reason="flaky"))
    second = store.steps.create(
        StepRunCreate(
            run_id=with_steps, name="train", status=S.RUNNING, attempt=2, inputs=train_inputs
        )
    )
    model = version("model", producer_step_run_id=second.id)
    store.steps.update(second.id, StepRunUpdate(status=S.COMPLETED, outputs={"model": model}))
    cached = StepRunCreate(run_id=with_steps, name="again", status=S.RUNNING, cache_key="k-load")
    store.steps.create(cached.reusing(store.steps.get(load.id)))
    store.steps.create(StepRunCreate(run_id=with_steps, name="never", status=S.STOPPED))
    store.runs.update(with_steps, RunUpdate(status=S.COMPLETED))
    version("model")
    store.steps.create(
        StepRunCreate(run_id=run(train, "other-steps", S.RUNNING), name="x", status=S.RUNNING)
    )


@pytest.fixture
def home(tmp_path: Path, _sqlite_template: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(_sqlite_template, home / "wharf.db")
    clock = FakeClock()
    store = SqlStore.open(f"sqlite:///{home / 'wharf.db'}", clock=clock)
    try:
        fill(store, clock)
    finally:
        store.close()
    return home


def outcome(reads: Reads, method: str, *args: Any, **kwargs: Any) -> tuple[Any, str]:
    """The answer with its JSON (which also shows the order of each record's links)."""
    try:
        answer = getattr(reads, method)(*args, **kwargs)
    except (EntityNotFoundError, AmbiguousIdError) as exc:
        return type(exc), str(exc)
    return answer, answer.model_dump_json()


class Both:
    """The quick reads and a ``Client`` of the same workspace, asked the same questions."""

    def __init__(self, config: WharfConfig) -> None:
        quick = QuickReads.open(config)
        assert quick is not None
        self.quick, self.client = quick, Client(config)

    def check(self, method: str, *args: Any, **kwargs: Any) -> Any:
        expected = outcome(self.client, method, *args, **kwargs)
        assert outcome(self.quick, method, *args, **kwargs) == expected, (method, args, kwargs)
        return expected[0]

    def close(self) -> None:
        self.quick.close()
        self.client.close()


@pytest.fixture(params=[None, "other"], ids=["default-project", "other-project"])
def both(request: pytest.FixtureRequest, home: Path) -> Any:
    pair = Both(config_for(home, request.param))
    yield pair
    pair.close()


def test_the_quick_path_reads_the_stores_revision_and_default_project() -> None:
    assert SCHEMA_REVISION == HEAD_REVISION
    assert DEFAULT_PROJECT == defaults.DEFAULT_PROJECT


def test_run_lists_match_for_every_filter_and_page(both: Both) -> None:
    pipelines = both.check("list_pipelines").items
    for page, size in PAGES:
        both.check("list_pipelines", page=page, size=size)
    choices = [None, "missing", str(uuid.uuid4())]
    choices += [p.name for p in pipelines] + [str(p.id) for p in pipelines]
    for pipeline in choices:
        for page, size in PAGES:
            both.check("list_pipeline_runs", pipeline=pipeline, page=page, size=size)
        for status in S:
            for page, size in FEW_PAGES:
                both.check(
                    "list_pipeline_runs",
                    pipeline=pipeline,
                    status=status.value,
                    page=page,
                    size=size,
                )


def test_a_misspelt_pipeline_name_gets_the_clients_hint(both: Both) -> None:
    hint = (EntityNotFoundError, "No pipeline named 'trian'; did you mean 'train'?")
    assert outcome(both.quick, "get_pipeline", "trian") == hint
    assert both.check("list_pipeline_runs", pipeline="trian") is EntityNotFoundError


def test_run_lookups_and_step_lists_match(both: Both) -> None:
    runs = both.check("list_pipeline_runs", size=1000).items
    names = {run.name for run in runs} | {"missing", "nightly", "with-steps"}
    for run in [*sorted(names), *(str(run.id) for run in runs), str(uuid.uuid4())]:
        both.check("get_pipeline_run", run)
        for page, size in PAGES:
            both.check("list_run_steps", run, page=page, size=size)
    for run in runs:
        both.check("list_run_steps", run.id, size=1000)  # as ``runs show`` asks


def test_short_id_lookups_match(home: Path) -> None:
    """Two runs (without steps) given ids that share six digits: a longer prefix finds one, the
    shared one is ambiguous, fewer than four digits are only a name."""
    with Client(config_for(home)) as client:
        runs = client.list_pipeline_runs(size=1000).items
        bare = [r for r in runs if client.list_run_steps(r.id).total == 0][:2]
    twins = [uuid.UUID("abcdef01" + "0" * 24), uuid.UUID("abcdef02" + "0" * 24)]
    with closing(sqlite3.connect(home / "wharf.db")) as conn, conn:
        for run, new in zip(bare, twins, strict=True):
            conn.execute("UPDATE pipeline_run SET id = ? WHERE id = ?", (new.hex, run.id.hex))
    pair = Both(config_for(home))
    try:
        assert pair.check("get_pipeline_run", "abcdef01").id == twins[0]
        assert pair.check("get_pipeline_run", "ABCD-EF02").id == twins[1]
        kind, message = (
            pair.check("get_pipeline_run", "abcdef"),
            outcome(pair.quick, "get_pipeline_run", "abcdef")[1],
        )
        assert kind is AmbiguousIdError and str(twins[0]) in message and str(twins[1]) in message
        assert pair.check("get_pipeline_run", "abc") is EntityNotFoundError
        for run in [r for r in runs if r not in bare]:
            assert pair.check("get_pipeline_run", run.id.hex[:12]) == run
        pipeline = pair.check("list_pipelines").items[0]
        assert pair.check("get_pipeline", str(pipeline.id)[:8]) == pipeline
    finally:
        pair.close()


def test_what_runs_show_reads_matches(both: Both) -> None:
    """``runs show``'s other reads: pipelines and snapshots by id, step runs by id or prefix."""
    for run in both.check("list_pipeline_runs", size=1000).items:
        both.check("get_pipeline", run.pipeline_id)
        both.check("get_snapshot", run.snapshot_id)
        for step in both.check("list_run_steps", run.id, size=1000).items:
            both.check("get_step_run", step.id)
            both.check("get_step_run", step.id.hex[:10])
    both.check("get_step_run", str(uuid.uuid4()))
    both.check("get_step_run", "nope")
    both.check("get_snapshot", uuid.uuid4())
    runs = both.check("list_pipeline_runs", size=1000).items  # ``runs list``'s stacks
    snapshots = [r.snapshot_id for r in runs] + [uuid.uuid4()]  # the last one is unknown
    stacks = both.quick.get_snapshot_stack_ids(snapshots)
    assert stacks == both.client.get_snapshot_stack_ids(snapshots)
    assert set(stacks) == set(snapshots[:-1])


def test_stack_names_match(home: Path) -> None:
    """``runs show`` names a run's stack: a stack's name, None for one that is gone."""
    pair = Both(config_for(home))
    try:
        stack = pair.client.store.stacks.create_stack("prod", {})
        assert pair.quick.get_stack_name(stack.id) == pair.client.get_stack_name(stack.id)
        assert pair.quick.get_stack_name(stack.id) == "prod"
        gone = uuid.uuid4()
        assert pair.quick.get_stack_name(gone) is pair.client.get_stack_name(gone) is None
    finally:
        pair.close()


def test_artifact_lists_match(both: Both) -> None:
    for name in (None, "data", "model", "missing"):
        for page, size in PAGES:
            both.check("list_artifacts", name=name, page=page, size=size)
            both.check("list_artifact_versions", name=name, page=page, size=size)


def test_a_run_of_another_project_is_found_by_id_as_the_client_finds_it(home: Path) -> None:
    with Client(config_for(home, "other")) as client:
        elsewhere = client.list_pipeline_runs().items[0]
    pair = Both(config_for(home))
    try:
        assert pair.check("get_pipeline_run", str(elsewhere.id)) == elsewhere
    finally:
        pair.close()


def test_a_schema_newer_than_the_code_gets_the_normal_stores_error(home: Path) -> None:
    with closing(sqlite3.connect(home / "wharf.db")) as db, db:
        db.execute("UPDATE alembic_version SET version_num = 'f00dfeedbeef'")
    config = config_for(home)
    assert QuickReads.open(config) is None
    with pytest.raises(SchemaVersionError) as normal:
        SqlStore.open(config.store_url)
    with pytest.raises(SchemaVersionError) as quick:
        read(lambda r: r.list_pipeline_runs(), config)
    assert str(quick.value) == str(normal.value)
    assert "newer" in str(quick.value)


@pytest.mark.parametrize("empty_file", [False, True], ids=["no-file", "empty-file"])
def test_a_new_store_is_created_and_migrated_by_the_normal_path(
    tmp_path: Path, empty_file: bool
) -> None:
    config = config_for(tmp_path)
    if empty_file:
        (tmp_path / "wharf.db").touch()
    assert QuickReads.open(config) is None
    assert read(lambda r: r.list_pipeline_runs(), config).total == 0
    quick = QuickReads.open(config)  # now migrated, with its default project
    assert quick is not None
    quick.close()


def test_other_stores_and_settings_take_the_normal_path(home: Path) -> None:
    path = home / "wharf.db"
    for overrides in (
        {"server_url": "http://127.0.0.1:1"},
        {"store_url": "postgresql://postgres@127.0.0.1:1/x"},
        {"store_url": f"sqlite+pysqlite:///{path}"},
        {"store_url": f"sqlite:///{path}?timeout=5"},
        {"store_url": "sqlite:///:memory:"},
        {"resource_manager": "bogus"},
        {"project": "not-created-yet"},
    ):
        assert QuickReads.open(config_for(home, **overrides)) is None, overrides
    with pytest.raises(InputError, match="Unknown Resource Manager mode"):
        read(lambda r: r.list_pipelines(), config_for(home, resource_manager="bogus"))
    assert QuickReads.open(config_for(home, resource_manager="none")) is not None


def test_a_driver_error_is_answered_by_the_normal_store(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise QuickReadError("disk I/O error")

    config = config_for(home)
    with Client(config) as client:
        expected = client.list_pipeline_runs()
    monkeypatch.setattr(QuickReads, "_page", fail)
    assert read(lambda r: r.list_pipeline_runs(), config) == expected


def test_the_connection_cannot_write(home: Path) -> None:
    quick = QuickReads.open(config_for(home))
    assert quick is not None
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            quick._conn.execute("DELETE FROM step_run_output")
    finally:
        quick.close()


def wharf(home: Path, *args: str, store_url: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(home)
    if store_url:
        env["WHARF_STORE_URL"] = store_url
    result = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    return result.stdout


def test_commands_print_what_the_normal_path_prints(home: Path) -> None:
    normal = f"sqlite+pysqlite:///{home / 'wharf.db'}"  # a URL the quick path leaves alone
    for command in (
        ("runs", "list", "--size", "4"),
        ("runs", "show", "with-steps", "-o", "json"),
        ("steps", "list", "--run", "with-steps"),
        ("pipelines", "list", "-o", "json"),
        ("artifacts", "list", "--versions"),
    ):
        assert wharf(home, *command) == wharf(home, *command, store_url=normal), command


def test_listing_imports_neither_sqlalchemy_nor_the_engine(home: Path) -> None:
    code = "from wharf.cli.main import main\nmain(['runs', 'list'])\n"
    heavy = ["sqlalchemy", "wharf.sdk", "wharf.execution", "wharf.store.sql", "rich"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    assert loaded_after(code, heavy, env={**env, "WHARF_HOME": str(home)}) == []
