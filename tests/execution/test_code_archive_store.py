"""Wharf's own files never travel with the pipeline's code (``code_archive.wharf_state``), even
when Wharf's home lies inside the pipeline's source (a project-local ``WHARF_HOME``, a test's
temporary directory): packaging them would read the live SQLite store with plain file I/O, and
a process loses every POSIX lock it holds on a file when it closes any descriptor of that file,
so the submitting process's own store connections would silently lose theirs (another process
closing last then checkpoints and removes the log under them: lost writes, "database disk image
is malformed").

Real files, a real SQLite store opened by a real :class:`Workspace`; locks are probed from
another process."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.execution.test_code_archive import spec, tree
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.global_config import WharfConfig, load_config
from wharf.execution.code_archive import candidates, ship_code, source_root, wharf_state
from wharf.sdk.workspace import Workspace
from wharf.sql.engine import sqlite_files

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX advisory locks")

SHARED_LOCK_PROBE = """
import fcntl, os, sys
# SQLite's SHARED locks are read locks on bytes of [0x40000002, 0x40000002 + 510): a write
# lock on the whole range is refused while any process holds one.
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 510, 0x40000002)
except OSError:
    print("held")
else:
    print("free")
"""


def shared_lock(database: Path) -> str:
    """Whether some process holds a SQLite SHARED lock on ``database`` ("held" or "free"),
    asked by another process (this one's own locks never conflict with themselves)."""
    probe = [sys.executable, "-c", SHARED_LOCK_PROBE, str(database)]
    return subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A pipeline's source directory with Wharf's home (and so its store) inside it."""
    return tree(tmp_path / "project", {"pipeline.py": "X = 1\n", "pkg/helpers.py": "Y = 2\n"})


@pytest.fixture
def config(project: Path) -> WharfConfig:
    return load_config({"WHARF_HOME": str(project / "home")})


@pytest.fixture
def workspace(config: WharfConfig) -> Iterator[Workspace]:
    opened = Workspace.open(config)
    yield opened
    opened.close()


def test_wharf_state_names_the_store_with_its_log_files_the_home_and_the_artifacts(
    config: WharfConfig,
) -> None:
    database = config.home / "wharf.db"
    assert sqlite_files(config.store_url) == (
        database,
        *(Path(f"{database}{suffix}") for suffix in ("-wal", "-shm", "-journal")),
    )
    state = wharf_state(config)
    for path in (config.home, database, config.artifact_root, config.code_cache):
        assert path in state
    assert sqlite_files("postgresql://db.example/wharf") == ()


def test_a_source_holding_the_home_is_packaged_without_it(
    project: Path, config: WharfConfig, workspace: Workspace
) -> None:
    workspace.store.users.list()  # the store's file and log exist
    store = LocalArtifactStore(config.artifact_root)
    shipped = ship_code(spec(), store, travels=True, root=project, keep_out=wharf_state(config))
    assert shipped.code is not None
    with tarfile.open(fileobj=io.BytesIO(Path(shipped.code.uri).read_bytes())) as tar:
        assert sorted(tar.getnames()) == ["pipeline.py", "pkg/helpers.py"]


def test_an_artifact_store_inside_the_source_is_left_out(project: Path) -> None:
    store = LocalArtifactStore(project / "artifacts")  # named by the stack, not the settings
    shipped = ship_code(spec(), store, travels=True, root=project)
    assert shipped.code is not None
    # the next packaging does not take the archive just uploaded: same content, same archive
    assert ship_code(spec(), store, travels=True, root=project).code == shipped.code


def test_packaging_keeps_this_processs_locks_on_its_open_store(
    project: Path, config: WharfConfig, workspace: Workspace
) -> None:
    workspace.store.users.list()  # a pooled connection now holds its SHARED lock (WAL mode)
    database = config.home / "wharf.db"
    assert shared_lock(database) == "held"
    ship_code(
        spec(),
        LocalArtifactStore(config.artifact_root),
        travels=True,
        root=project,
        keep_out=wharf_state(config),
    )
    assert shared_lock(database) == "held"  # no descriptor of the store was opened and closed


def test_only_paths_inside_the_source_are_left_out_never_the_source_itself(
    project: Path,
) -> None:
    root = source_root(project)
    everything = candidates(root)
    assert candidates(root, keep_out=(project, project.parent, Path("/elsewhere"))) == everything
    assert candidates(root, keep_out=(project / "pkg",)) == ["pipeline.py"]
    assert candidates(root, keep_out=(project / "pkg" / "helpers.py",)) == ["pipeline.py"]
    assert candidates(root, keep_out=(project / "pk",)) == everything  # a prefix, not a parent
