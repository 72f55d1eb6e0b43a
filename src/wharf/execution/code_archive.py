"""The pipeline's code packaged for steps that run elsewhere (the submitting side).

Owns which directory is the pipeline's source (:func:`source_root`), which of its files travel
(``.gitignore`` honoured; never Wharf's own: :func:`wharf_state`), the content digest, the
archive and its upload (:func:`ship_code`). Invariants: the same content gives the same digest
wherever it lies and whenever it was touched, and the same files give the same archive bytes;
an archive at ``<store root>/code/<digest>.tar.gz`` is seen whole or not at all, and holds what
its name says; the size limit is checked before any file is read; no file of Wharf's home,
store or artifact store is ever opened, even inside the source (a plain ``close`` of the store's
SQLite file would drop this process's own SQLite locks on it: ``wharf.sql.engine.sqlite_files``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import subprocess
import sys
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol, TypeVar

from wharf.artifacts.store import ArtifactStore, join_uri
from wharf.config.global_config import WharfConfig
from wharf.config.spec import CodeArchiveRef, CodeSource, PipelineSpec
from wharf.core.errors import InputError, WharfError
from wharf.execution.code_digests import FileHashes

T = TypeVar("T")

CODE_DIRECTORY = "code"
"""Where archives lie under the artifact store's root."""
ARCHIVE_SUFFIX = ".tar.gz"
DEFAULT_LIMIT_BYTES = 64 * 1024 * 1024
ALWAYS_EXCLUDED_DIRS = frozenset({".git", "__pycache__", ".hg", ".svn"})
_CHUNK = 1024 * 1024
_MIB = 1024 * 1024


@dataclass(frozen=True)
class CodeFile:
    path: str
    """Relative to the source root, ``/``-separated."""
    size: int
    executable: bool


@dataclass(frozen=True)
class CodeManifest:
    root: Path
    files: tuple[CodeFile, ...]
    digest: str

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


# ------------------------------------------------------------------ which directory


def git_root(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` that holds a ``.git`` entry."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def entry_directory() -> Path:
    """The directory of this process's entry module (``python -m a.b`` counts from the
    directory ``a`` is in); the working directory when there is no entry file."""
    main = sys.modules.get("__main__")
    file = getattr(main, "__file__", None)
    if not file:
        return Path.cwd()
    directory = Path(file).resolve().parent
    module_spec = getattr(main, "__spec__", None)
    name = getattr(module_spec, "name", None) or ""
    for _ in range(name.count(".")):  # a.b (a/b.py) and a (a/__main__.py): from a's parent
        directory = directory.parent
    return directory


def source_root(start: Path | None = None) -> Path:
    """The pipeline's source: the git repository enclosing ``start`` (default: the entry
    module's directory), else ``start`` itself."""
    start = (start or entry_directory()).resolve()
    return git_root(start) or start


# ------------------------------------------------------------------ which files


def list_files(root: Path) -> list[str]:
    """The relative paths of the files that travel, sorted: what ``.gitignore`` keeps."""
    prefix = os.path.join(str(root), "")
    return [name for name in candidates(root) if os.path.isfile(prefix + name)]


def candidates(root: Path, keep_out: Sequence[Path] = ()) -> list[str]:
    """The paths that may travel, sorted: what ``.gitignore`` keeps (``git ls-files`` may name
    a file deleted since it was added; :func:`scan` skips what is not a regular file), except
    those at or under a path of ``keep_out`` that lies inside ``root`` (a path that is ``root``
    or encloses it leaves nothing out)."""
    names = _git_files(root) if os.path.exists(os.path.join(root, ".git")) else _walk_files(root)
    inside = _inside(root, keep_out)
    return sorted(
        {
            n
            for n in names
            if not _always_excluded(n) and not any(n == p or n.startswith(p + "/") for p in inside)
        }
    )


def _inside(root: Path, paths: Sequence[Path]) -> list[str]:
    """The ``/``-separated paths relative to ``root`` of those of ``paths`` strictly inside it
    (symbolic links resolved, as :func:`source_root` resolves ``root``)."""
    resolved_root = root.resolve()
    found = []
    for path in paths:
        resolved = Path(os.path.abspath(path)).resolve()
        if resolved != resolved_root and resolved.is_relative_to(resolved_root):
            found.append(resolved.relative_to(resolved_root).as_posix())
    return found


def wharf_state(config: WharfConfig) -> tuple[Path, ...]:
    """Wharf's own files, which never travel even when they lie inside the pipeline's source (a
    project-local ``WHARF_HOME``): its home (settings and credentials, code cache, remembered
    hashes), the embedded store's SQLite file with its log and index, and the artifact root.
    Beyond what they have nothing to do with the code, reading the live store here would break
    it: see :func:`wharf.sql.engine.sqlite_files`."""
    from wharf.sql.engine import sqlite_files  # SQLAlchemy: not for a step fetching its code

    return (
        config.home,
        *sqlite_files(config.store_url),
        config.artifact_root,
        config.code_cache,
        config.code_hashes,
    )


def _always_excluded(name: str) -> bool:
    parts = name.split("/")
    return name.endswith(".pyc") or any(p in ALWAYS_EXCLUDED_DIRS for p in parts[:-1])


def _git_files(root: Path) -> list[str]:
    command = ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others"]
    try:
        result = subprocess.run(
            [*command, "--exclude-standard"], capture_output=True, check=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        message = detail.decode(errors="replace").strip() or str(exc)
        raise InputError(f"Cannot list the files of the git repository {root}: {message}") from exc
    return [n for n in result.stdout.decode("utf-8", "surrogateescape").split("\0") if n]


def _walk_files(root: Path) -> list[str]:
    import pathspec

    found: list[str] = []
    # (directory relative to root, its .gitignore): deeper files decide first, as in git
    ignores: list[tuple[str, pathspec.GitIgnoreSpec]] = []

    def ignored(relative: str, is_dir: bool) -> bool:
        for base, spec in reversed(ignores):
            if base and not relative.startswith(base + "/"):
                continue
            inside = relative[len(base) + 1 :] if base else relative
            verdict = spec.check_file(inside + ("/" if is_dir else "")).include
            if verdict is not None:
                return verdict
        return False

    def visit(directory: str, relative: str) -> None:
        gitignore = os.path.join(directory, ".gitignore")
        pushed = os.path.isfile(gitignore)
        if pushed:
            with open(gitignore, encoding="utf-8", errors="replace") as lines:
                ignores.append((relative, pathspec.GitIgnoreSpec.from_lines(lines)))
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    path = f"{relative}/{entry.name}" if relative else entry.name
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name in ALWAYS_EXCLUDED_DIRS or (ignores and ignored(path, True)):
                            continue
                        if os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                            continue  # a virtual environment: never the pipeline's code
                        visit(entry.path, path)
                    elif entry.is_file() and not (ignores and ignored(path, False)):
                        found.append(path)
        finally:
            if pushed:
                ignores.pop()

    visit(str(root), "")
    return found


# ------------------------------------------------------------------ digest and archive


def scan(
    root: Path,
    names: Sequence[str],
    limit_bytes: int = DEFAULT_LIMIT_BYTES,
    known: FileHashes | None = None,
) -> CodeManifest:
    """The manifest of the regular files among ``names`` under ``root``; ``InputError`` over
    ``limit_bytes`` (checked before any file is read; one line naming the size, the limit,
    the largest files and how to exclude). ``known``: file hashes remembered from
    earlier scans, reused for files whose size, times and inode are unchanged."""
    prefix = os.path.join(str(root), "")
    files, stats = [], []
    for name in names:
        try:
            info = os.stat(prefix + name)
        except FileNotFoundError:
            continue  # deleted since git listed it
        if stat.S_ISREG(info.st_mode):
            files.append(CodeFile(name, info.st_size, bool(info.st_mode & stat.S_IXUSR)))
            stats.append(info)
    total = sum(f.size for f in files)
    if total > limit_bytes:
        largest = sorted(files, key=lambda f: -f.size)[:3]
        biggest = ", ".join(f"{f.path} ({f.size / _MIB:.1f} MiB)" for f in largest)
        raise InputError(
            f"The pipeline's code in {root} is {total / _MIB:.1f} MiB ({len(files)} files), over "
            f"the code archive limit of {limit_bytes / _MIB:.1f} MiB (largest: {biggest}); "
            "exclude files in .gitignore, raise WHARF_CODE_ARCHIVE_LIMIT_MIB, or set "
            "code_source='image' if the code is installed where steps run."
        )
    digest = hashlib.sha256()
    for file, info in sorted(zip(files, stats, strict=True), key=lambda pair: pair[0].path):
        file_hash = known.get(file.path, info) if known is not None else None
        if file_hash is None:
            with open(prefix + file.path, "rb") as handle:
                file_hash = hashlib.file_digest(handle, "sha256").digest()
            if known is not None:
                known.put(file.path, info, file_hash)
        entry_digest(digest, file.path, file.executable, file_hash)
    return CodeManifest(root, tuple(files), digest.hexdigest())


class Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


def entry_digest(digest: Digest, path: str, executable: bool, file_hash: bytes) -> None:
    """Add one file to a content digest (the unpacking side recomputes it the same way): the
    digest is SHA-256 over the sorted files' relative paths, executable bits and SHA-256s."""
    encoded = path.encode("utf-8", "surrogateescape")
    digest.update(len(encoded).to_bytes(4, "big") + encoded)
    digest.update(b"x" if executable else b"-")
    digest.update(file_hash)


def write_archive(manifest: CodeManifest, out: IO[bytes]) -> str:
    """Write the deterministic tar.gz of ``manifest``'s files to ``out`` (sorted entries,
    mtime 0, owner 0, modes 0644/0755, a gzip header without name or time); returns the
    content digest of what it wrote (other than ``manifest.digest`` if a file changed
    meanwhile)."""
    digest = hashlib.sha256()
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.GNU_FORMAT) as tar,
    ):
        for file in sorted(manifest.files, key=lambda f: f.path):
            info = tarfile.TarInfo(file.path)
            info.size = file.size
            info.mode = 0o755 if file.executable else 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(manifest.root / file.path, "rb") as handle:
                source = _Exactly(handle, file.size, file.path)
                tar.addfile(info, source)
            entry_digest(digest, file.path, file.executable, source.hash.digest())
    return digest.hexdigest()


class _Exactly(io.RawIOBase):
    """A file's first ``size`` bytes, hashed as read; a file that shrank is an error."""

    def __init__(self, handle: IO[bytes], size: int, name: str) -> None:
        self._handle, self._left, self._name = handle, size, name
        self.hash = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        wanted = self._left if size < 0 else min(size, self._left)
        data = self._handle.read(wanted)
        if len(data) < wanted:
            raise InputError(f"{self._name} changed while the code archive was written.")
        self._left -= len(data)
        self.hash.update(data)
        return data


def archive_uri(store: ArtifactStore, digest: str) -> str:
    return join_uri(store.path, CODE_DIRECTORY, digest + ARCHIVE_SUFFIX)


def upload(manifest: CodeManifest, store: ArtifactStore) -> tuple[CodeArchiveRef, bool]:
    """The archive of ``manifest`` in ``store``, and whether this call wrote it (False: an
    archive with the same digest was there already). It is written only when absent (checked
    first), through the store's atomic write, its content hashed again as it is written: an
    interrupted upload, or code that changed while packaged, leaves nothing at the URI."""
    uri = archive_uri(store, manifest.digest)
    written = not store.exists(uri)
    if written:
        with store.open(uri, "wb") as out:
            if write_archive(manifest, out) != manifest.digest:  # leaves nothing at the URI
                raise InputError(
                    f"The pipeline's code in {manifest.root} changed while it was packaged; "
                    "run again."
                )
    ref = CodeArchiveRef(
        uri=uri,
        digest=manifest.digest,
        source_root=str(manifest.root),
        files=len(manifest.files),
        size=manifest.size,
    )
    return ref, written


# ------------------------------------------------------------------ a run's code


class Launcher(Protocol):
    """An orchestrator or step operator, as far as the code's travel goes."""

    @property
    def code_travels(self) -> bool: ...


def code_travels(spec: PipelineSpec, orchestrator: Launcher, operator: Launcher | None) -> bool:
    """Some step of ``spec`` may run outside this file system: the orchestrator says its steps
    do, or the step operator says so and a step names it (any step may, in a dynamic run)."""
    if orchestrator.code_travels:
        return True
    if operator is None or not operator.code_travels:
        return False
    return spec.dynamic or any(s.config.step_operator for s in spec.steps.values())


def wanted_source(configured: CodeSource | None, travels: bool) -> CodeSource:
    """The code source a run uses: the pipeline's setting, else ``archive`` when its steps
    run outside this file system and ``local`` when they do not."""
    if configured is not None:
        return configured
    return "archive" if travels else "local"


class ThroughOutage(Protocol):
    """Calls ``call`` again while the artifact store cannot be reached (``what`` names it in
    the log), running ``before_again`` before each repeat; its last error once it gives up
    (``wharf.execution.artifact_outages.through_artifact_outage`` bound to a run)."""

    def __call__(
        self, call: Callable[[], T], what: str, *, before_again: Callable[[], object] | None = None
    ) -> T: ...


def _once(
    call: Callable[[], T], what: str, *, before_again: Callable[[], object] | None = None
) -> T:
    return call()


def ship_code(
    spec: PipelineSpec,
    store: ArtifactStore,
    *,
    travels: bool,
    limit_bytes: int = DEFAULT_LIMIT_BYTES,
    root: Path | None = None,
    hashes_dir: Path | None = None,
    keep_out: Sequence[Path] = (),
    through_outage: ThroughOutage = _once,
) -> PipelineSpec:
    """``spec`` with its code archive (packaged and uploaded if needed) when the run's code
    source is ``archive``; ``spec`` unchanged otherwise. ``hashes_dir``: where file hashes are
    remembered between calls (``wharf.execution.code_digests``; None: every file is read).
    ``keep_out``: paths that never travel (:func:`wharf_state`); the root of a local ``store``
    never does either (else each archive would hold the ones before it). The upload is tried
    again through an outage of the store as ``through_outage`` waits one out; once it gives up,
    or the store refuses it, one line (``WharfError``, the backend's chain not shown)."""
    if wanted_source(spec.config.code_source, travels) != "archive":
        return spec
    where = source_root(root)
    known = None if hashes_dir is None else FileHashes.load(hashes_dir, where)
    local_store = [Path(store.path)] if os.path.isabs(store.path) else []
    manifest = scan(where, candidates(where, [*keep_out, *local_store]), limit_bytes, known)
    if known is not None:
        known.save()
    uri = archive_uri(store, manifest.digest)

    def clear_leftovers() -> None:
        """What a cut upload left (an incomplete multipart upload), never a published one."""
        if not store.exists(uri):
            store.rmtree(uri)

    try:
        ref, _ = through_outage(
            lambda: upload(manifest, store),
            "upload the pipeline's code archive",
            before_again=clear_leftovers,
        )
    except OSError as exc:  # the store's own one line, its backend's chain not shown
        raise WharfError(f"The pipeline's code archive could not be uploaded: {exc}") from None
    return spec.model_copy(update={"code": ref})
