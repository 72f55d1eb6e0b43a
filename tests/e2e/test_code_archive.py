"""Code that travels with the run, end to end with real processes: a pipeline script whose step
module exists only in the submitter's directory runs on a ``local_process`` stack configured
with ``code_travels``; each step's process starts in an empty directory of its own, without the
submitter's paths, and imports the step from the run's code archive."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import MotoServer
from tests.e2e.test_isolated import make_stack, steps
from wharf import Client
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord

s3_server = s3.s3_server
s3_bucket = s3.s3_bucket

STEPS_MODULE = """
import os
import sys

from wharf import step

VERSION = 1


@step(enable_cache=False)
def where() -> dict:
    return {"cwd": os.getcwd(), "path": sys.path, "file": __file__, "version": VERSION}
"""

SCRIPT = """
from wharf import pipeline, step

from travelling_steps import where


@step(enable_cache=False)
def told(place: dict) -> str:
    return "script at " + __file__ + " saw " + place["file"]


@pipeline(code_source={code_source})
def travelling():
    told(where())


if __name__ == "__main__":
    travelling()
"""

DYNAMIC_SCRIPT = """
from wharf import pipeline, step

from travelling_steps import where


@step(enable_cache=False)
def told(place: dict) -> str:
    return "script at " + __file__ + " saw " + place["file"]


@pipeline(dynamic=True)
def travelling():
    told.with_options(runtime="isolated")(where.with_options(runtime="isolated")())


if __name__ == "__main__":
    travelling()
"""

BOUND = 120  # seconds: a hang fails the test instead of blocking it


@pytest.fixture
def travels(wharf_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A fresh home whose active stack runs each step as if on another machine."""
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "travels")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    ws = Workspace.open(load_config())
    make_stack(ws, "travels", "local_process", orchestrator_config={"code_travels": True})
    yield ws
    ws.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The pipeline's code: only in this directory (not a git repository, not installed)."""
    where = tmp_path / "project"
    where.mkdir()
    (where / "travelling_steps.py").write_text(STEPS_MODULE)
    (where / "run.py").write_text(SCRIPT.format(code_source=None))
    (where / ".gitignore").write_text("data/\n")
    (where / "data").mkdir()
    (where / "data" / "big.bin").write_bytes(b"\0" * 4096)  # ignored: never archived
    return where


def submit(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "run.py"],
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env=dict(os.environ),
        cwd=project,
    )


def latest_run(workspace: Workspace) -> PipelineRunRecord:
    return workspace.store.runs.list(page=PageRequest(size=1)).items[0]


def archives(workspace: Workspace) -> dict[str, int]:
    """The code archives in the artifact store, with their inode (a rewrite changes it)."""
    code = workspace.config.artifact_root / "code"
    if not code.is_dir():
        return {}
    return {p.name: p.stat().st_ino for p in code.iterdir()}


def test_a_step_module_only_the_submitter_has_is_imported_from_the_archive(
    travels: Workspace, project: Path
) -> None:
    done = submit(project)
    assert done.returncode == 0, done.stderr
    run = latest_run(travels)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    code = travels.store.snapshots.get(run.snapshot_id).spec.code
    assert code is not None and code.source_root == str(project.resolve())
    assert code.files == 3  # travelling_steps.py, run.py, .gitignore; not data/big.bin
    tree = travels.config.code_cache / code.digest
    client = Client(travels.config, travels.store)
    place = client.load_step_output(run.id, "where")
    assert place["cwd"] == str(tree)
    assert place["file"] == str(tree / "travelling_steps.py")
    assert place["path"][0] == str(tree)
    assert not any(str(project) in entry for entry in place["path"])
    assert str(project) not in place["cwd"]
    found = steps(travels, run.id)
    assert found["where"].pid != found["told"].pid  # each step in its own process
    told = client.load_step_output(run.id, "told")
    assert told == f"script at {tree / 'run.py'} saw {tree / 'travelling_steps.py'}"
    assert not (tree / "data").exists()

    # Unchanged code: nothing is uploaded again, and the unpacked tree is reused.
    before = archives(travels)
    assert list(before) == [f"{code.digest}.tar.gz"]
    cache_inode = tree.stat().st_ino
    assert submit(project).returncode == 0
    second = latest_run(travels)
    assert second.id != run.id and second.status is ExecutionStatus.COMPLETED
    assert travels.store.snapshots.get(second.snapshot_id).spec.code == code
    assert archives(travels) == before
    assert tree.stat().st_ino == cache_inode
    assert sorted(p.name for p in travels.config.code_cache.iterdir()) == [code.digest]
    assert len(list(travels.config.code_hashes.iterdir())) == 1  # the project's file hashes

    # Changed code: a new archive, and the step runs the new code. The script is now dynamic
    # and runs its steps isolated: each in a process of its own, from the new archive too.
    steps_file = project / "travelling_steps.py"
    steps_file.write_text(STEPS_MODULE.replace("VERSION = 1", "VERSION = 2"))
    (project / "run.py").write_text(DYNAMIC_SCRIPT)
    done = submit(project)
    assert done.returncode == 0, done.stderr
    third = latest_run(travels)
    assert third.status is ExecutionStatus.COMPLETED, third.status_reason
    assert len(archives(travels)) == 2
    new_code = travels.store.snapshots.get(third.snapshot_id).spec.code
    assert new_code is not None and new_code.digest != code.digest
    new_tree = travels.config.code_cache / new_code.digest
    place = client.load_step_output(third.id, "where")
    assert place["version"] == 2
    assert place["cwd"] == str(new_tree)
    told = client.load_step_output(third.id, "told")
    assert told == f"script at {new_tree / 'run.py'} saw {new_tree / 'travelling_steps.py'}"
    found = steps(travels, third.id)
    assert found["where"].pid != found["told"].pid


def test_code_source_image_packages_nothing(travels: Workspace, project: Path) -> None:
    (project / "run.py").write_text(SCRIPT.format(code_source=repr("image")))
    done = submit(project)
    assert done.returncode == 1  # the step cannot import code that did not travel
    run = latest_run(travels)
    assert travels.store.snapshots.get(run.snapshot_id).spec.code is None
    assert archives(travels) == {}
    where = steps(travels, run.id)["where"]
    assert where.status is ExecutionStatus.FAILED
    assert "No module named 'travelling_steps'" in (where.status_reason or "")


def test_code_over_the_limit_is_refused_before_anything_is_recorded(
    travels: Workspace, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "weights.bin").write_bytes(b"\1" * (2 * 1024 * 1024))
    monkeypatch.setenv("WHARF_CODE_ARCHIVE_LIMIT_MIB", "1")
    done = submit(project)
    assert done.returncode == 1
    assert "over the code archive limit of 1.0 MiB" in done.stderr
    assert "weights.bin (2.0 MiB)" in done.stderr
    assert travels.store.runs.list(page=PageRequest(size=1)).items == []
    assert archives(travels) == {}


def test_the_archive_travels_through_an_s3_artifact_store(
    wharf_home: Path,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    s3_bucket: str,
) -> None:
    """Only the step ``where`` runs, in a process that fetches the archive from S3 (the first
    test shows a step importing the script itself from the archive)."""
    (project / "run.py").write_text(
        SCRIPT.format(code_source=None).replace("told(where())", "where()")
    )
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "s3-travels")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    ws = Workspace.open(load_config())
    try:
        store = {"path": f"s3://{s3_bucket}/wharf", "endpoint_url": s3_server.endpoint}
        stacks.register_component(ws, "remote", ComponentType.ARTIFACT_STORE, "fsspec", store)
        orchestrator = {"code_travels": True}
        stacks.register_component(
            ws, "travels", ComponentType.ORCHESTRATOR, "local_process", orchestrator
        )
        stacks.register_stack(ws, "s3-travels", orchestrator="travels", artifact_store="remote")
        done = submit(project)
        assert done.returncode == 0, done.stderr
        run = latest_run(ws)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        code = ws.store.snapshots.get(run.snapshot_id).spec.code
        assert code is not None and code.uri.startswith(f"s3://{s3_bucket}/wharf/code/")
        place = Client(ws.config, ws.store).load_step_output(run.id, "where")
        assert place["file"] == str(ws.config.code_cache / code.digest / "travelling_steps.py")

        bucket = s3_server.client()
        key = f"wharf/code/{code.digest}.tar.gz"
        first = bucket.head_object(Bucket=s3_bucket, Key=key)
        assert submit(project).returncode == 0  # unchanged code: the object is not written again
        again = bucket.head_object(Bucket=s3_bucket, Key=key)
        assert (again["ETag"], again["LastModified"]) == (first["ETag"], first["LastModified"])
        listed = bucket.list_objects_v2(Bucket=s3_bucket, Prefix="wharf/code/")
        assert [o["Key"] for o in listed["Contents"]] == [key]
    finally:
        ws.close()


def test_a_step_operator_that_runs_steps_elsewhere_gets_the_archive(
    wharf_home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``local`` orchestrator: only the step that names the operator runs elsewhere."""
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "operated")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    steps_file = project / "travelling_steps.py"
    steps_file.write_text(
        STEPS_MODULE.replace(
            "@step(enable_cache=False)", '@step(enable_cache=False, step_operator="op")'
        )
    )
    ws = Workspace.open(load_config())
    try:
        op = {"code_travels": True}
        stacks.register_component(ws, "op", ComponentType.STEP_OPERATOR, "local_process", op)
        stacks.register_stack(
            ws, "operated", orchestrator="default", artifact_store="default", step_operator="op"
        )
        done = submit(project)
        assert done.returncode == 0, done.stderr
        run = latest_run(ws)
        assert run.status is ExecutionStatus.COMPLETED, run.status_reason
        code = ws.store.snapshots.get(run.snapshot_id).spec.code
        assert code is not None
        tree = ws.config.code_cache / code.digest
        client = Client(ws.config, ws.store)
        assert client.load_step_output(run.id, "where")["cwd"] == str(tree)
        told = client.load_step_output(run.id, "told")  # inline, in the submitting process
        assert told == f"script at {project / 'run.py'} saw {tree / 'travelling_steps.py'}"
    finally:
        ws.close()
