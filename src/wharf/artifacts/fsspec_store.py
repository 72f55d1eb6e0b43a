"""An :class:`~wharf.artifacts.store.ArtifactStore` on any fsspec URL: S3, GCS, Azure, ``file://``.

The only module that imports ``fsspec`` (and, through it, s3fs / gcsfs / adlfs), lazily: on the
first use of a store, never on import. Configuration and credentials:
:mod:`wharf.artifacts.fsspec_options`.

Invariants (those of :mod:`wharf.artifacts.store`, plus): URIs are full URLs under the root, and
any other is refused with ``InputError`` before any I/O; a written object is complete or absent
(:class:`_PublishingWriter`); a writer holds a few parts in memory, never the whole artifact;
failures are ``OSError`` with one line naming the store, operation and URI
(:meth:`FsspecArtifactStore.error`), :class:`ArtifactStoreUnreachableError` when the store
could not be reached (:func:`store_unreachable`); :meth:`FsspecArtifactStore.check_usable`
says in one line, before a run starts, why the store cannot be used.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import threading
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any, TypeVar, cast

from wharf.artifacts.fsspec_options import check_configuration, check_path, resolve_options
from wharf.artifacts.publishing import PublishingFile
from wharf.core.errors import InputError, WharfError
from wharf.core.ids import new_id

if TYPE_CHECKING:
    from uuid import UUID

_T = TypeVar("_T")
_READ_MODES = frozenset({"r", "rb"})
_WRITE_MODES = frozenset({"w", "wb"})
_LOCAL_PROTOCOLS = frozenset({"file", "local"})
_S3_PROTOCOLS = frozenset({"s3", "s3a"})
_ABSENT, _DIRECTORY = -2, -1
_MAX_REMEMBERED = 4096
DEFAULT_BLOCK_SIZE = 16 * 2**20
"""Bytes buffered per part of an upload (S3 accepts parts of 5 MiB and more)."""
_WRITE_CHUNK = DEFAULT_BLOCK_SIZE
"""The most bytes handed to the backend's writer at once (see :meth:`_PublishingWriter.write`);
less on an object store whose parts are smaller."""


class ArtifactStoreError(OSError):
    """The artifact store could not be used (unreachable, misconfigured, refused the call)."""


class ArtifactStoreUnreachableError(ArtifactStoreError):
    """The artifact store could not be reached (a connection refused, reset or timed out):
    the same call may succeed once it is back, unlike a refusal or a missing object."""


_UNREACHABLE_CLASSES = frozenset(
    {
        ("botocore.exceptions", "ConnectionError"),  # refused, closed, connect timeout
        ("botocore.exceptions", "HTTPClientError"),  # read timeout, reset mid-answer
        ("aiohttp.client_exceptions", "ClientConnectionError"),  # reset, disconnected
        ("aiohttp.client_exceptions", "ServerTimeoutError"),
    }
)


def _unreachable_error(error: BaseException) -> bool:
    if isinstance(error, (ConnectionError, TimeoutError, ArtifactStoreUnreachableError)):
        return True
    return any((c.__module__, c.__name__) in _UNREACHABLE_CLASSES for c in type(error).__mro__)


def store_unreachable(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, says that a store could not be
    reached (not that it refused the call or lacks the object): worth waiting out."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if _unreachable_error(current):
            return True
        seen.add(id(current))
        suppressed = current.__suppress_context__
        current = current.__cause__ or (None if suppressed else current.__context__)
    return False


class FsspecArtifactStore:
    """Artifacts under an fsspec URL. Install the backend with ``wharf[s3]``, ``wharf[gcs]``
    or ``wharf[azure]``.

    ``options`` go to the fsspec backend (``endpoint_url=…`` for an S3-compatible server);
    ``<name>_env`` options are read from the environment here, at construction.

    URIs are full URLs under the root (``s3://bucket/prefix/<pipeline>/<run>/<hex>``), so a
    record names its bytes wherever it is read; a URI outside the root, or with empty, ``.``
    or ``..`` segments, is refused. A small artifact is one object; no directory marker
    objects are written (``makedirs`` is a no-op on object stores, where directories are key
    prefixes); readers fetch ranges. Failures are ``FileNotFoundError`` for a missing object
    or bucket, ``PermissionError`` for refused credentials, :class:`ArtifactStoreError`
    otherwise.
    """

    def __init__(
        self, path: str, id: UUID | None = None, *, options: Mapping[str, Any] | None = None
    ) -> None:
        self._root = check_path(path)
        self._id = id
        config = check_configuration({"path": self._root, **dict(options or {})})
        self._options = resolve_options(config)
        self._protocol = self._root.split("://", 1)[0]
        self._fs: Any = None
        self._fs_pid = -1
        self._fs_lock = threading.Lock()
        self._fs_lock_pid = os.getpid()
        self._root_fs_path = ""
        self._sizes: dict[str, int] = {}
        self._fresh: set[str] = set()  # paths from new_uri() nothing was written to yet
        endpoint = self._options.get("endpoint_url")
        self._display = f"'{self._root}'" + (f" at {endpoint}" if endpoint else "")

    @classmethod
    def from_configuration(
        cls, configuration: Mapping[str, Any], id: UUID | None = None
    ) -> FsspecArtifactStore:
        """The store a component's recorded configuration describes."""
        options = {k: v for k, v in configuration.items() if k != "path"}
        return cls(configuration.get("path"), id, options=options)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"FsspecArtifactStore({self._root!r}, id={self._id!r})"

    @property
    def id(self) -> UUID | None:
        return self._id

    @property
    def path(self) -> str:
        return self._root

    @property
    def is_object_store(self) -> bool:
        """Whether objects are published on completed upload (not by a rename)."""
        return self._protocol not in _LOCAL_PROTOCOLS

    # ------------------------------------------------------------------ the backend

    @property
    def fs(self) -> Any:
        """The fsspec file system, created on first use (and anew in a forked child), once
        even when several threads (a run's steps) reach it first together."""
        pid = os.getpid()
        if self._fs is not None and self._fs_pid == pid:
            return self._fs
        if self._fs_lock_pid != pid:  # forked: the parent's lock may have been held at the fork
            self._fs_lock, self._fs_lock_pid = threading.Lock(), pid
        with self._fs_lock:
            if self._fs is None or self._fs_pid != pid:
                self._create_fs()
        return self._fs

    def _create_fs(self) -> None:
        try:
            import fsspec
        except ImportError:  # pragma: no cover - depends on the installation
            raise WharfError(
                f"The artifact store {self._display} needs fsspec: pip install 'wharf[s3]'"
                " (or wharf[gcs], wharf[azure])."
            ) from None
        try:
            fs, root = fsspec.core.url_to_fs(self._root, **self._backend_options())
        except ImportError as error:
            raise WharfError(
                f"The artifact store {self._display} needs its fsspec backend: {error}"
            ) from None
        self._fs, self._root_fs_path, self._fs_pid = fs, root.rstrip("/") or "/", os.getpid()

    def _backend_options(self) -> dict[str, Any]:
        """The backend's options: on S3, short timeouts and one retry, so that an unreachable
        store fails within seconds instead of retrying for minutes; options given by the user
        win."""
        options = dict(self._options)
        if self._protocol in _S3_PROTOCOLS:
            config = dict(options.get("config_kwargs") or {})
            config.setdefault("connect_timeout", 5)
            config.setdefault("read_timeout", 60)
            config.setdefault("retries", {"max_attempts": 2, "mode": "standard"})
            options["config_kwargs"] = config
            options.setdefault("use_listings_cache", False)  # other processes write too
            options.setdefault("default_block_size", DEFAULT_BLOCK_SIZE)
        if self.is_object_store:
            options.setdefault("skip_instance_cache", True)  # our retries/timeouts, our object
        return options

    def fs_path(self, uri: str) -> str:
        """The backend's path of ``uri``; ``InputError`` if it is not under the root."""
        if not isinstance(uri, str) or "\0" in uri:
            raise InputError(f"Artifact URI must be a string URL, got {uri!r}.")
        if uri == self._root:
            relative = ""
        elif uri.startswith(self._root + "/"):
            relative = uri[len(self._root) + 1 :]
            parts = relative.split("/")
            if any(part in ("", ".", "..") for part in parts):
                raise InputError(f"Artifact URI {uri!r} has empty, '.' or '..' segments.")
        else:
            raise InputError(f"Artifact URI {uri!r} is outside the artifact store {self._root!r}.")
        fs = self.fs
        del fs  # sets _root_fs_path
        base = self._root_fs_path
        if not relative:
            return base
        return f"{base}/{relative}" if base != "/" else f"/{relative}"

    def _call(self, action: str, uri: str, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except (InputError, WharfError):
            raise
        except Exception as error:
            raise self.error(action, uri, error) from error

    def check_usable(self) -> None:
        """Raise ``WharfError`` (one line naming the store and what is wrong, the backend's
        exception not chained) unless the store answers: on S3, one listing of at most one key
        under the root, which needs the endpoint to answer, the bucket to exist and the
        credentials to be accepted and allowed to list the root (as :meth:`exists` needs).
        Other backends are not asked (a missing ``file://`` root is created on first write)."""
        if self._protocol not in _S3_PROTOCOLS:
            return
        try:
            bucket, key, _ = self.fs.split_path(self.fs_path(self._root))
            prefix = f"{key}/" if key else ""
            answer = self.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, MaxKeys=1)
        except WharfError:
            raise
        except Exception as error:
            raise WharfError(
                f"Artifact store {self._display} cannot be used: {self._unusable(error)}"
            ) from None
        if not isinstance(answer, Mapping) or answer.get("Name") != bucket:
            # e.g. a web page: its HTML parses as an empty listing
            raise WharfError(
                f"Artifact store {self._display} cannot be used: {self._endpoint} did not "
                f"answer a listing of the bucket '{bucket}' as S3 does; check that endpoint_url "
                "is the S3 API's address."
            ) from None

    @property
    def _endpoint(self) -> str:
        return str(self._options.get("endpoint_url") or "the S3 endpoint")

    def _unusable(self, error: BaseException) -> str:
        """What :meth:`check_usable`'s failure means, in a user's terms, with the cause."""
        cause = " ".join(str(error).split()) or type(error).__name__
        bucket = self._root.split("://", 1)[1].split("/", 1)[0]
        endpoint = self._endpoint
        if isinstance(error, FileNotFoundError) and "bucket" in cause.lower():
            return f"the bucket '{bucket}' does not exist ({cause})."
        if isinstance(error, PermissionError):
            return (
                f"its credentials were refused ({cause}); check the AWS_* variables, the profile "
                "or the component's key_env/secret_env options."
            )
        name = type(error).__name__
        if _unreachable_error(error):
            return f"{endpoint} cannot be reached ({name}: {cause})."
        return (  # e.g. a web server's 404 page: not S3's answer for a missing bucket
            f"{endpoint} answered a listing of the bucket '{bucket}' with {name}: {cause}; "
            "check that endpoint_url is the S3 API's address and that the bucket exists."
        )

    def error(self, action: str, uri: str, error: BaseException) -> OSError:
        """One line naming the store, the operation, the URI and the cause, as an ``OSError``
        of the cause's kind (``FileNotFoundError`` stays one)."""
        cause = " ".join(str(error).split())
        cause = f"{type(error).__name__}: {cause}" if cause else type(error).__name__
        message = f"Artifact store {self._display} cannot {action} {uri!r}: {cause}"
        if _unreachable_error(error):
            return ArtifactStoreUnreachableError(message)
        kind = type(error) if isinstance(error, OSError) else ArtifactStoreError
        try:
            return kind(message)
        except Exception:  # an OSError subclass with another signature
            return ArtifactStoreError(message)

    # ------------------------------------------------------------------ the contract

    def open(self, uri: str, mode: str = "rb") -> IO[Any]:
        path = self.fs_path(uri)
        if mode in _READ_MODES:
            kwargs: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8"}
            size = self._sizes.pop(path, None)  # known from a probe: no HEAD request
            if size is not None:
                kwargs["size"] = size
            return cast(
                IO[Any], self._call("read", uri, lambda: self.fs.open(path, mode, **kwargs))
            )
        if mode in _WRITE_MODES:
            return cast(IO[Any], _PublishingWriter(self, uri, path, binary="b" in mode))
        raise InputError(f"Unsupported artifact file mode {mode!r}; use 'rb', 'r', 'wb' or 'w'.")

    def exists(self, uri: str) -> bool:
        path = self.fs_path(uri)
        if self._protocol in _S3_PROTOCOLS:
            return self._call("check", uri, lambda: self._probe(path)) != _ABSENT
        return bool(self._call("check", uri, lambda: self.fs.exists(path)))

    def isdir(self, uri: str) -> bool:
        path = self.fs_path(uri)
        if self._protocol in _S3_PROTOCOLS:
            return self._call("check", uri, lambda: self._probe(path)) == _DIRECTORY
        return bool(self._call("check", uri, lambda: self.fs.isdir(path)))

    def _probe(self, path: str) -> int:
        """What is at ``path`` on S3: ``_ABSENT``, ``_DIRECTORY`` or an object's size (which the
        next read of it uses instead of asking again). An object is one HEAD request (an
        artifact is an object at its key, or keys below it: no marker objects); otherwise one
        listing of the keys below it."""
        bucket, key, _ = self.fs.split_path(path)
        if not key:
            return _DIRECTORY
        try:
            head = self.fs.call_s3("head_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            pass
        else:
            size = int(head.get("ContentLength", 0))
            if len(self._sizes) >= _MAX_REMEMBERED:
                self._sizes.clear()
            self._sizes[path] = size
            return size
        below = self.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=key + "/", MaxKeys=1)
        return _DIRECTORY if below.get("KeyCount", 0) or below.get("Contents") else _ABSENT

    def makedirs(self, uri: str, exist_ok: bool = True) -> None:
        path = self.fs_path(uri)
        if not self.is_object_store:
            self._touched(path)
            self._call("create", uri, lambda: self.fs.makedirs(path, exist_ok=exist_ok))
            return
        # Directories are key prefixes: nothing to create, no marker object.
        if not exist_ok and self.exists(uri):
            raise FileExistsError(f"Artifact store {self._display}: {uri!r} exists.")

    def listdir(self, uri: str) -> list[str]:
        path = self.fs_path(uri)
        entries = self._call("list", uri, lambda: self.fs.ls(path, detail=False))
        names = [posixpath.basename(str(entry).rstrip("/")) for entry in entries]
        return [name for name in names if name and str(name) != posixpath.basename(path)]

    def rmtree(self, uri: str) -> None:
        path = self.fs_path(uri)
        if uri == self._root:
            raise InputError("Refusing to remove the root of the artifact store.")

        self._touched(path)

        def remove() -> None:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm(path, recursive=True)
            if self._protocol in _S3_PROTOCOLS:
                # garbage collection only: credentials that may not list uploads skip it
                with contextlib.suppress(PermissionError, NotImplementedError):
                    self._abort_uploads(path)

        self._call("remove", uri, remove)

    def _abort_uploads(self, path: str) -> None:
        """Abort the incomplete multipart uploads at or under ``path``: one cut off while the
        store could not be reached (its abort failed too) holds its parts, billed and unseen,
        until aborted."""
        bucket, key, _ = self.fs.split_path(path)
        listing = self.fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=key)
        for upload in listing.get("Uploads", []):
            name = upload.get("Key", "")
            if name == key or name.startswith(key + "/"):
                self.fs.call_s3(
                    "abort_multipart_upload", Bucket=bucket, Key=name, UploadId=upload["UploadId"]
                )

    def new_uri(self, *parts: str) -> str:
        uri = "/".join((self._root, *parts, new_id().hex))
        if len(self._fresh) >= _MAX_REMEMBERED:
            self._fresh.clear()  # then they are merely checked
        self._fresh.add(self.fs_path(uri))
        return uri

    def issued_unwritten(self, uri: str) -> bool:
        """Whether ``uri`` came from :meth:`new_uri` of this object and nothing was written at
        or under it through this object since: then nothing is there (128 random bits), and
        :func:`~wharf.artifacts.artifact_io.save_artifact` need not ask the store."""
        return self.fs_path(uri) in self._fresh

    def _touched(self, path: str) -> None:
        """``path`` is being written or removed: neither it nor its parents are fresh now."""
        self._sizes.pop(path, None)
        while self._fresh and path not in ("", "/"):
            self._fresh.discard(path)
            path = posixpath.dirname(path)


class _PublishingWriter(PublishingFile):
    """A write-only file that is published at its URI by ``close()`` and nowhere before.

    Object stores: the backend's writer, whose upload completes on close (a single PUT for a
    small file, the completion of the multipart upload for a large one, each part of
    ``default_block_size``), so a reader sees the whole object or nothing; abandoning it (see
    :class:`~wharf.artifacts.publishing.PublishingFile`) aborts the upload (the backend file is
    then marked closed so that its own finaliser cannot publish a partial object).
    ``file://``: a hidden temporary file in the target's directory, renamed over it on close.
    """

    def __init__(self, store: FsspecArtifactStore, uri: str, path: str, *, binary: bool) -> None:
        store._touched(path)
        self._store = store
        self._uri = uri
        self._path = path
        fs = store.fs
        if store.is_object_store:
            self._tmp = None
            target = path
        else:
            parent, name = posixpath.split(path)
            self._tmp = posixpath.join(parent, f".{name}.{os.urandom(6).hex()}.tmp")
            target = self._tmp
            store._call("create", uri, lambda: fs.makedirs(parent, exist_ok=True))
        self._text = not binary  # encoded here: the backend's file stays binary (discardable)
        self._file = store._call("write", uri, lambda: fs.open(target, "wb"))
        # An object store's writer uploads a part per block it buffered: handed a block at a
        # time, it holds one, whatever the size of one write() (a local file buffers nothing).
        part = getattr(self._file, "blocksize", 0) if store.is_object_store else 0
        self._chunk = (
            min(part, _WRITE_CHUNK) if isinstance(part, int) and part > 0 else _WRITE_CHUNK
        )
        self._done = False

    def write(self, data: Any) -> int:
        """Write ``data`` a part at a time: the backend's writer copies what it is given into
        its buffer, so one write of a whole artifact would hold it there (and in the part cut
        from it) at once."""
        try:
            if self._text:
                step = max(self._chunk // 4, 1)  # UTF-8: at most 4 bytes a character
                for start in range(0, len(data), step):
                    self._file.write(data[start : start + step].encode("utf-8"))
                return len(data)
            view = memoryview(data).cast("B")
            for start in range(0, view.nbytes, self._chunk):
                self._file.write(view[start : start + self._chunk])
        except Exception as error:
            raise self._store.error("write", self._uri, error) from error
        return view.nbytes

    def _publish(self) -> None:
        """Complete the upload (or rename the temporary file): the artifact file appears."""
        try:
            self._file.close()
            if self._tmp is not None:
                self._store.fs.mv(self._tmp, self._path)
        except BaseException as error:
            self._abandon()
            if isinstance(error, Exception):
                raise self._store.error("write", self._uri, error) from error
            raise

    def _abandon(self) -> None:
        file = self._file
        with contextlib.suppress(Exception):
            if self._tmp is None:
                discard = getattr(file, "discard", None)
                if discard is not None:
                    discard()  # aborts a multipart upload
            else:
                file.close()
        with contextlib.suppress(Exception):
            file.closed = True  # the backend's finaliser must not publish the part written
        if self._tmp is not None:
            with contextlib.suppress(Exception):
                self._store.fs.rm(self._tmp)
