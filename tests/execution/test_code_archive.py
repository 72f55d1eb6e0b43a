"""The submitting side of code archives: which root and files, the digest, the deterministic
archive, the size limit, and at most one upload per digest (through the local artifact store)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import PipelineConfig, PipelineSpec, StepConfig, StepSpec
from wharf.core.errors import InputError
from wharf.execution.code_archive import (
    archive_uri,
    code_travels,
    list_files,
    scan,
    ship_code,
    source_root,
    upload,
    wanted_source,
    write_archive,
)


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def archive_bytes(root: Path) -> bytes:
    out = io.BytesIO()
    write_archive(scan(root, list_files(root)), out)
    return out.getvalue()


def test_the_same_content_gives_the_same_digest_and_bytes(tmp_path: Path) -> None:
    files = {"a.py": "A = 1\n", "pkg/__init__.py": "", "pkg/b.py": "B = 2\n"}
    one = tree(tmp_path / "one", files)
    two = tree(tmp_path / "two", dict(reversed(files.items())))
    os.utime(two / "a.py", (1, 1))  # other times, other order of creation
    assert scan(one, list_files(one)).digest == scan(two, list_files(two)).digest
    assert archive_bytes(one) == archive_bytes(two)
    with tarfile.open(fileobj=io.BytesIO(archive_bytes(one)), mode="r:gz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["a.py", "pkg/__init__.py", "pkg/b.py"]
    assert {(m.mtime, m.uid, m.gid, m.mode) for m in members} == {(0, 0, 0, 0o644)}


@pytest.mark.parametrize("change", ["content", "name", "executable"])
def test_the_digest_changes_with_content_names_and_executable_bits(
    tmp_path: Path, change: str
) -> None:
    root = tree(tmp_path, {"a.py": "A = 1\n"})
    before = scan(root, list_files(root)).digest
    if change == "content":
        (root / "a.py").write_text("A = 2\n")
    elif change == "name":
        (root / "a.py").rename(root / "b.py")
    else:
        (root / "a.py").chmod(0o755)
    assert scan(root, list_files(root)).digest != before


def test_gitignore_files_are_honoured_without_git(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            ".gitignore": "*.log\n!keep.log\nbuild/\n",
            "main.py": "",
            "run.log": "",
            "keep.log": "",
            "build/out.py": "",
            "sub/.gitignore": "local.txt\n",
            "sub/local.txt": "",
            "sub/mod.py": "",
            "sub/x.log": "",
            "pkg/__pycache__/mod.cpython-311.pyc": "",
            "stray.pyc": "",
            "venv/pyvenv.cfg": "",
            "venv/lib/site.py": "",
            ".git_like/file": "",
        },
    )
    assert list_files(root) == [
        ".git_like/file",
        ".gitignore",
        "keep.log",
        "main.py",
        "sub/.gitignore",
        "sub/mod.py",
    ]


def test_a_git_repository_lists_tracked_and_untracked_files_but_not_ignored_ones(
    tmp_path: Path,
) -> None:
    root = tree(
        tmp_path / "repo",
        {".gitignore": "secret.txt\n", "tracked.py": "", "new.py": "", "secret.txt": ""},
    )
    git = ["git", "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "tracked.py", ".gitignore"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    (root / "gone.py").write_text("")
    subprocess.run([*git, "add", "gone.py"], check=True)
    (root / "gone.py").unlink()  # in the index, not on disk: not archived
    assert list_files(root) == [".gitignore", "new.py", "tracked.py"]
    (root / "deep").mkdir()
    assert source_root(root / "deep") == root  # the repository's root, from anywhere in it


def test_outside_a_repository_the_root_is_the_directory_itself(tmp_path: Path) -> None:
    assert source_root(tmp_path) == tmp_path.resolve()


@pytest.mark.parametrize(
    ("files", "argv"),
    [
        (["run.py"], ["run.py"]),
        (["app/__init__.py", "app/main.py"], ["-m", "app.main"]),
        (["app/__init__.py", "app/__main__.py"], ["-m", "app"]),
        (["app/__init__.py", "app/cli/__init__.py", "app/cli/__main__.py"], ["-m", "app.cli"]),
    ],
)
def test_the_entry_directory_is_where_the_entry_module_is_imported_from(
    tmp_path: Path, files: list[str], argv: list[str]
) -> None:
    program = "from wharf.execution.code_archive import entry_directory; print(entry_directory())"
    for name in files:
        tree(tmp_path, {name: program if name == files[-1] else ""})
    done = subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path.resolve())


def test_code_over_the_limit_is_one_clear_error(tmp_path: Path) -> None:
    root = tree(tmp_path, {"small.py": "x" * 10})
    (root / "model.bin").write_bytes(b"\0" * 300_000)
    with pytest.raises(InputError) as caught:
        scan(root, list_files(root), limit_bytes=100_000)
    message = str(caught.value)
    assert "\n" not in message
    assert "is 0.3 MiB (2 files), over the code archive limit of 0.1 MiB" in message
    assert "largest: model.bin (0.3 MiB), small.py (0.0 MiB)" in message
    assert ".gitignore" in message and "WHARF_CODE_ARCHIVE_LIMIT_MIB" in message


def test_an_archive_is_uploaded_once_per_digest(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    root = tree(tmp_path / "code", {"a.py": "A = 1\n"})
    ref, written = upload(scan(root, list_files(root)), store)
    assert written and ref.uri == archive_uri(store, ref.digest)
    assert ref.files == 1 and ref.size == 6 and ref.source_root == str(root)
    inode = os.stat(ref.uri).st_ino
    again, written = upload(scan(root, list_files(root)), store)
    assert again == ref and not written
    assert os.stat(ref.uri).st_ino == inode
    assert os.listdir(tmp_path / "artifacts" / "code") == [f"{ref.digest}.tar.gz"]


def test_an_upload_that_fails_leaves_no_archive(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    root = tree(tmp_path / "code", {"a.py": "A = 1\n", "b.py": "B = 2\n"})
    manifest = scan(root, list_files(root))
    (root / "b.py").unlink()  # vanishes while being archived
    with pytest.raises(FileNotFoundError):
        upload(manifest, store)
    assert os.listdir(tmp_path / "artifacts" / "code") == []


def spec(code_source: str | None = None, operator: str | None = None) -> PipelineSpec:
    step = StepSpec(
        name="s", source="m:s", code_hash="h", config=StepConfig(step_operator=operator)
    )
    config = PipelineConfig(code_source=code_source)  # type: ignore[arg-type]
    return PipelineSpec(name="p", config=config, steps={"s": step})


@dataclass
class Launcher:
    code_travels: bool


def test_code_travels_when_the_orchestrator_or_a_used_step_operator_says_so() -> None:
    assert code_travels(spec(), Launcher(True), None)
    assert not code_travels(spec(), Launcher(False), None)
    assert not code_travels(spec(), Launcher(False), Launcher(True))  # no step names it
    assert code_travels(spec(operator="op"), Launcher(False), Launcher(True))
    assert not code_travels(spec(operator="op"), Launcher(False), Launcher(False))


def test_the_code_source_defaults_by_where_steps_run_and_a_setting_wins() -> None:
    assert wanted_source(None, travels=True) == "archive"
    assert wanted_source(None, travels=False) == "local"
    assert wanted_source("image", travels=True) == "image"
    assert wanted_source("archive", travels=False) == "archive"


def test_ship_code_packages_only_for_an_archive(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    root = tree(tmp_path / "code", {"a.py": ""})
    assert ship_code(spec("image"), store, travels=True, root=root).code is None
    assert ship_code(spec(), store, travels=False, root=root).code is None
    assert not (tmp_path / "artifacts").exists()
    shipped = ship_code(spec(), store, travels=True, root=root)
    assert shipped.code is not None and os.path.exists(shipped.code.uri)
    assert shipped.model_copy(update={"code": None}) == spec()


def test_code_that_changes_while_packaged_is_not_published(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    root = tree(tmp_path / "code", {"a.py": "A = 1\n"})
    manifest = scan(root, list_files(root))
    (root / "a.py").write_text("A = 2\n")  # same size, other content
    with pytest.raises(InputError, match="changed while it was packaged"):
        upload(manifest, store)
    assert os.listdir(tmp_path / "artifacts" / "code") == []
