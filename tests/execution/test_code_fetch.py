"""The executing side of code archives: download, verify, unpack atomically into the cache,
reuse, refuse unsafe or tampered archives, and find a script's file in the unpacked tree."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import CodeArchiveRef, StepSpec
from wharf.core.errors import InputError
from wharf.execution.code_archive import list_files, scan, upload
from wharf.execution.code_fetch import cached_code, relocated


def shipped(tmp_path: Path) -> tuple[LocalArtifactStore, CodeArchiveRef]:
    root = tmp_path / "code"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text("VALUE = 41\n")
    (root / "tool.sh").write_text("#!/bin/sh\n")
    (root / "tool.sh").chmod(0o755)
    store = LocalArtifactStore(tmp_path / "artifacts")
    ref, _ = upload(scan(root, list_files(root)), store)
    return store, ref


def test_an_archive_is_unpacked_once_and_then_reused(tmp_path: Path) -> None:
    store, ref = shipped(tmp_path)
    cache = tmp_path / "cache"
    tree = cached_code(store, ref, cache)
    assert tree == cache / ref.digest
    assert (tree / "pkg" / "mod.py").read_text() == "VALUE = 41\n"
    assert os.access(tree / "tool.sh", os.X_OK)
    store.rmtree(ref.uri)  # the cache no longer needs the store
    assert cached_code(store, ref, cache) == tree
    assert os.listdir(cache) == [ref.digest]


def test_concurrent_unpacking_yields_one_complete_tree(tmp_path: Path) -> None:
    store, ref = shipped(tmp_path)
    cache = tmp_path / "cache"
    results: list[Path] = []
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            results.append(cached_code(store, ref, cache))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=fetch) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert set(results) == {cache / ref.digest}
    assert os.listdir(cache) == [ref.digest]  # no temporary tree left behind


def test_an_archive_with_other_content_than_recorded_is_refused(tmp_path: Path) -> None:
    store, ref = shipped(tmp_path)
    forged = ref.model_copy(update={"digest": "0" * 64})
    cache = tmp_path / "cache"
    with pytest.raises(InputError, match="holds other content than recorded"):
        cached_code(store, forged, cache)
    assert os.listdir(cache) == []


def test_a_missing_archive_is_named(tmp_path: Path) -> None:
    store, ref = shipped(tmp_path)
    store.rmtree(ref.uri)
    with pytest.raises(InputError, match="is missing from the artifact store"):
        cached_code(store, ref, tmp_path / "cache")


@pytest.mark.parametrize("name", ["../escape.py", "/etc/evil.py"])
def test_unsafe_paths_are_refused(tmp_path: Path, name: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    store = LocalArtifactStore(tmp_path / "artifacts")
    uri = store.new_uri("code")
    with store.open(uri, "wb") as out:
        out.write(buffer.getvalue())
    ref = CodeArchiveRef(uri=uri, digest="0" * 64, source_root="/src", files=1, size=1)
    with pytest.raises(InputError, match="unsafe path"):
        cached_code(store, ref, tmp_path / "cache")
    assert not (tmp_path / "escape.py").exists()
    assert os.listdir(tmp_path / "cache") == []


def test_a_script_under_the_source_root_is_found_in_the_tree(tmp_path: Path) -> None:
    ref = CodeArchiveRef(uri="/a/b", digest="0" * 64, source_root="/src/proj", files=0, size=0)
    script = StepSpec(
        name="s", source="__main__:s", source_file="/src/proj/bin/run.py", code_hash=""
    )
    moved = relocated(script, ref, tmp_path)
    assert moved.source_file == str(tmp_path / "bin" / "run.py")
    elsewhere = script.model_copy(update={"source_file": "/other/run.py"})
    assert relocated(elsewhere, ref, tmp_path) == elsewhere
    module = StepSpec(name="s", source="pkg.mod:s", code_hash="")
    assert relocated(module, ref, tmp_path) == module


def test_a_step_imported_through_the_archive_resolver_comes_from_the_tree(tmp_path: Path) -> None:
    """In a process of its own (the resolver changes sys.path and the working directory)."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "steps_here.py").write_text(
        "from wharf import step\n\n@step\ndef s() -> int:\n    return 1\n"
    )
    store = LocalArtifactStore(tmp_path / "artifacts")
    ref, _ = upload(scan(tmp_path / "code", ["steps_here.py"]), store)
    (tmp_path / "code" / "steps_here.py").unlink()  # only the archive has it now
    program = f"""
import os, sys
from pathlib import Path
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import CodeArchiveRef, StepSpec
from wharf.execution.code_fetch import archive_resolver
ref = CodeArchiveRef.model_validate_json({ref.model_dump_json()!r})
resolve = archive_resolver(LocalArtifactStore({str(store.path)!r}), ref, Path({str(tmp_path / "c")!r}))
step = resolve(StepSpec(name="s", source="steps_here:s", code_hash=""))
print(sys.modules["steps_here"].__file__, os.getcwd(), sys.path[0])
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    tree = tmp_path / "c" / ref.digest
    assert done.stdout.split() == [str(tree / "steps_here.py"), str(tree), str(tree)]
