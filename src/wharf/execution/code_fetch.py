"""A run's code archive on the machine that executes a step: download, unpack, cache, import.

Owns the per-machine cache of unpacked archives (``<cache>/<digest>``, :func:`cached_code`) and
how a step's process loads its step from one (:func:`archive_resolver`; not fetched once the
step was asked to stop). Invariants: a cache
entry is complete or absent, and never modified after it appears; unpacking writes only regular
files and directories inside the target; a step loaded from an archive sees the unpacked tree
first on ``sys.path`` and as its working directory.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from wharf.artifacts.store import ArtifactStore
from wharf.config.spec import CodeArchiveRef, StepSpec
from wharf.core.errors import InputError
from wharf.execution.artifact_outages import through_artifact_outage
from wharf.execution.code_archive import entry_digest
from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted
from wharf.execution.services import RunServices
from wharf.execution.step_like import StepLike
from wharf.execution.step_runner import StepResolver, import_step

_CHUNK = 1024 * 1024


def cached_code(store: ArtifactStore, ref: CodeArchiveRef, cache_dir: Path) -> Path:
    """The unpacked tree of ``ref``, from the cache or downloaded into it now: unpacked into a
    fresh temporary directory beside the entry, its content digest checked against the
    recorded one, and only then renamed into place (when two processes race, one rename wins
    and the other's tree is removed)."""
    final = cache_dir / ref.digest
    if final.is_dir():
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{ref.digest[:16]}-", suffix=".tmp", dir=cache_dir))
    try:
        try:
            with store.open(ref.uri, "rb") as archive:
                digest = unpack(archive, tmp)
        except FileNotFoundError:
            raise InputError(
                f"The run's code archive {ref.uri} is missing from the artifact store."
            ) from None
        except (OSError, tarfile.TarError) as exc:
            raise InputError(f"Cannot read the run's code archive {ref.uri}: {exc}") from exc
        if digest != ref.digest:
            raise InputError(
                f"The run's code archive {ref.uri} holds other content than recorded "
                f"(digest {digest[:12]}…, expected {ref.digest[:12]}…)."
            )
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():  # not a concurrent unpacking that won the rename
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def unpack(archive: object, target: Path) -> str:
    """Unpack the tar.gz stream ``archive`` into ``target``; returns its content digest.
    Refuses absolute paths, ``..``, links and devices, and streams the archive (no
    whole-archive copy in memory)."""
    digest = hashlib.sha256()
    entries: list[tuple[str, bool, bytes]] = []
    with tarfile.open(fileobj=archive, mode="r|gz") as tar:  # type: ignore[call-overload]
        for member in tar:
            name = _safe_name(member.name)
            if member.isdir():
                (target / name).mkdir(parents=True, exist_ok=True)
                continue
            if not member.isfile():
                raise InputError(f"The code archive holds {member.name!r}, not a regular file.")
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            file_hash = hashlib.sha256()
            with open(path, "wb") as out:
                while chunk := source.read(_CHUNK):
                    file_hash.update(chunk)
                    out.write(chunk)
            executable = bool(member.mode & 0o100)
            os.chmod(path, 0o755 if executable else 0o644)
            entries.append((name, executable, file_hash.digest()))
    for name, executable, file_hash_bytes in sorted(entries):
        entry_digest(digest, name, executable, file_hash_bytes)
    return digest.hexdigest()


def _safe_name(name: str) -> str:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise InputError(f"The code archive holds an unsafe path {name!r}.")
    return str(path)


def relocated(spec: StepSpec, ref: CodeArchiveRef, tree: Path) -> StepSpec:
    """``spec`` with its script file (if any) found in ``tree`` instead of the source root (at
    the same path relative to the submitter's source root)."""
    if spec.source_file is None:
        return spec
    with contextlib.suppress(ValueError):
        relative = Path(spec.source_file).relative_to(ref.source_root)
        return spec.model_copy(update={"source_file": str(tree / relative)})
    return spec


def use_tree(tree: Path) -> None:
    """Make ``tree`` the first import location and the working directory of this process."""
    location = str(tree)
    if location in sys.path:
        sys.path.remove(location)
    sys.path.insert(0, location)
    os.chdir(location)


def archive_resolver(
    store: ArtifactStore,
    ref: CodeArchiveRef,
    cache_dir: Path,
    region: InterruptibleRegion | None = None,
    services: RunServices | None = None,
) -> StepResolver:
    """A step resolver that imports steps from ``ref``'s tree (fetched on the first call): its
    errors fail the step with their message, as an import error does. ``region``: the step's;
    once it is interrupted (a stop learnt before the step's code starts) nothing is fetched:
    :class:`StepInterrupted` is raised, as entering the region would after the fetch. With the
    run's ``services``, a fetch is tried again through a short outage of the store."""

    def resolve(spec: StepSpec) -> StepLike:
        if region is not None and region.interrupted:  # stopping: not worth a download
            raise StepInterrupted(region.reason)
        fetch = functools.partial(cached_code, store, ref, cache_dir)
        tree = (
            fetch()
            if services is None
            else through_artifact_outage(services, fetch, "fetch the run's code archive")
        )
        use_tree(tree)
        return import_step(relocated(spec, ref, tree))

    return resolve
