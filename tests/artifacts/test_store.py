from __future__ import annotations

import gc
import os
import uuid
from pathlib import Path

import pytest

from wharf.artifacts.store import ArtifactStore, LocalArtifactStore, join_uri
from wharf.core.errors import InputError


def test_local_store_implements_the_protocol(tmp_path: Path) -> None:
    store_id = uuid.uuid4()
    store = LocalArtifactStore(tmp_path, id=store_id)
    assert isinstance(store, ArtifactStore)
    assert store.id == store_id
    assert store.path == str(tmp_path)
    assert LocalArtifactStore(tmp_path).id is None


def test_root_is_made_absolute_and_normalised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = LocalArtifactStore("a/./b/../c")
    assert store.path == str(tmp_path / "a" / "c")


def test_join_uri() -> None:
    assert join_uri("/r/a", "b", "c.json") == "/r/a/b/c.json"
    assert join_uri("/r/a/", "b") == "/r/a/b"
    assert join_uri("s3://bucket/x", "y") == "s3://bucket/x/y"


class TestNewUri:
    def test_is_under_the_root_and_ends_with_the_parts_and_a_random_name(
        self, store: LocalArtifactStore
    ) -> None:
        uri = store.new_uri("pipe", "step", "output")
        parent, name = os.path.split(uri)
        assert parent == os.path.join(store.path, "pipe", "step", "output")
        assert len(name) == 32 and int(name, 16) >= 0

    def test_is_unique_and_creates_nothing(self, store: LocalArtifactStore) -> None:
        uris = {store.new_uri("p") for _ in range(1000)}
        assert len(uris) == 1000
        assert not os.path.exists(store.path)

    def test_without_parts(self, store: LocalArtifactStore) -> None:
        assert os.path.dirname(store.new_uri()) == store.path

    @pytest.mark.parametrize("parts", [("..", "x"), ("a", "..", "..", "x"), ("/etc",)])
    def test_refuses_parts_that_leave_the_root(
        self, store: LocalArtifactStore, parts: tuple[str, ...]
    ) -> None:
        with pytest.raises(InputError, match="outside the artifact store"):
            store.new_uri(*parts)


class TestPathTraversal:
    @pytest.fixture
    def bad_uris(self, store: LocalArtifactStore) -> list[str]:
        root = store.path
        return [
            "/etc/passwd",
            f"{root}/../outside",
            f"{root}/a/../../outside",
            f"{root}-sibling/file",
            os.path.dirname(root),
        ]

    @pytest.mark.parametrize(
        "call",
        [
            lambda s, u: s.open(u, "rb"),
            lambda s, u: s.open(u, "wb"),
            lambda s, u: s.exists(u),
            lambda s, u: s.isdir(u),
            lambda s, u: s.makedirs(u),
            lambda s, u: s.listdir(u),
            lambda s, u: s.rmtree(u),
        ],
        ids=["open-read", "open-write", "exists", "isdir", "makedirs", "listdir", "rmtree"],
    )
    def test_every_operation_refuses_uris_outside_the_root(
        self, store: LocalArtifactStore, bad_uris: list[str], call: object
    ) -> None:
        for uri in bad_uris:
            with pytest.raises(InputError, match="outside the artifact store"):
                call(store, uri)  # type: ignore[operator]

    @pytest.mark.parametrize("uri", ["relative/path", "", "with\0nul"])
    def test_refuses_non_absolute_uris(self, store: LocalArtifactStore, uri: str) -> None:
        with pytest.raises(InputError, match="absolute path"):
            store.exists(uri)

    def test_dot_dot_that_stays_inside_is_normalised(self, store: LocalArtifactStore) -> None:
        uri = join_uri(store.path, "a", "..", "b")
        with store.open(uri, "wb") as f:
            f.write(b"x")
        assert os.path.isfile(os.path.join(store.path, "b"))

    def test_input_error_is_a_value_error(self, store: LocalArtifactStore) -> None:
        with pytest.raises(ValueError):
            store.exists("/etc")


class TestFiles:
    def test_binary_and_text_round_trip(self, store: LocalArtifactStore) -> None:
        uri = store.new_uri("f")
        with store.open(join_uri(uri, "b.bin"), "wb") as f:
            f.write(b"\x00\xff")
        with store.open(join_uri(uri, "t.txt"), "w") as f:
            f.write("héllo ✓")
        with store.open(join_uri(uri, "b.bin"), "rb") as f:
            assert f.read() == b"\x00\xff"
        with store.open(join_uri(uri, "t.txt")) as f:
            assert f.read() == b"h\xc3\xa9llo \xe2\x9c\x93"  # default mode is "rb"; UTF-8
        with store.open(join_uri(uri, "t.txt"), "r") as f:
            assert f.read() == "héllo ✓"

    def test_writing_creates_missing_parent_directories(self, store: LocalArtifactStore) -> None:
        uri = join_uri(store.path, "a", "b", "c", "file")
        with store.open(uri, "wb") as f:
            f.write(b"x")
        assert store.isdir(join_uri(store.path, "a", "b"))

    @pytest.mark.parametrize("mode", ["ab", "a", "r+", "rb+", "x", "wt+"])
    def test_other_modes_are_refused(self, store: LocalArtifactStore, mode: str) -> None:
        with pytest.raises(InputError, match="Unsupported artifact file mode"):
            store.open(join_uri(store.path, "f"), mode)

    def test_reading_a_missing_file_raises_file_not_found(self, store: LocalArtifactStore) -> None:
        with pytest.raises(FileNotFoundError):
            store.open(join_uri(store.path, "missing"), "rb")

    def test_directory_operations(self, store: LocalArtifactStore) -> None:
        uri = store.new_uri("d")
        assert not store.exists(uri)
        store.makedirs(uri)
        store.makedirs(uri)  # exist_ok by default
        with pytest.raises(FileExistsError):
            store.makedirs(uri, exist_ok=False)
        for name in ("x", "y"):
            with store.open(join_uri(uri, name), "wb") as f:
                f.write(b"")
        store.makedirs(join_uri(uri, "sub"))
        assert store.exists(uri) and store.isdir(uri)
        assert not store.isdir(join_uri(uri, "x"))
        assert sorted(store.listdir(uri)) == ["sub", "x", "y"]

    def test_rmtree_removes_trees_and_files_and_ignores_missing(
        self, store: LocalArtifactStore
    ) -> None:
        tree = store.new_uri("t")
        with store.open(join_uri(tree, "a", "b"), "wb") as f:
            f.write(b"x")
        single = join_uri(store.path, "single")
        with store.open(single, "wb") as f:
            f.write(b"x")
        store.rmtree(tree)
        store.rmtree(single)
        store.rmtree(store.new_uri("never-created"))
        assert not store.exists(tree) and not store.exists(single)

    def test_rmtree_removes_a_symlink_not_its_target(
        self, store: LocalArtifactStore, tmp_path: Path
    ) -> None:
        target = tmp_path / "target"
        target.mkdir()
        (target / "keep").write_bytes(b"x")
        store.makedirs(store.path)
        link = join_uri(store.path, "link")
        os.symlink(target, link)
        store.rmtree(link)
        assert not os.path.lexists(link)
        assert (target / "keep").exists()

    def test_rmtree_refuses_the_root(self, store: LocalArtifactStore) -> None:
        store.makedirs(store.path)
        with pytest.raises(InputError, match="root"):
            store.rmtree(store.path)
        assert store.isdir(store.path)


class TestAtomicWrites:
    def _uri(self, store: LocalArtifactStore) -> str:
        return join_uri(store.new_uri("atomic"), "data.bin")

    def test_file_appears_only_on_close_and_no_temporary_remains(
        self, store: LocalArtifactStore
    ) -> None:
        uri = self._uri(store)
        f = store.open(uri, "wb")
        f.write(b"partial")
        f.flush()
        assert not store.exists(uri)
        assert not f.closed
        f.close()
        assert f.closed
        f.close()  # idempotent
        assert os.listdir(os.path.dirname(uri)) == ["data.bin"]
        with store.open(uri) as g:
            assert g.read() == b"partial"

    def test_exception_inside_with_leaves_no_file(self, store: LocalArtifactStore) -> None:
        uri = self._uri(store)
        with pytest.raises(RuntimeError), store.open(uri, "wb") as f:
            f.write(b"half")
            raise RuntimeError("crash while writing")
        assert os.listdir(os.path.dirname(uri)) == []

    def test_exception_keeps_the_previous_version_intact(self, store: LocalArtifactStore) -> None:
        uri = self._uri(store)
        with store.open(uri, "w") as f:
            f.write("old")
        with pytest.raises(RuntimeError), store.open(uri, "w") as f:
            f.write("new but never fini")
            raise RuntimeError
        with store.open(uri, "r") as f:
            assert f.read() == "old"
        assert os.listdir(os.path.dirname(uri)) == ["data.bin"]

    def test_writer_dropped_unclosed_publishes_nothing(self, store: LocalArtifactStore) -> None:
        uri = self._uri(store)
        f = store.open(uri, "wb")
        f.write(b"abandoned")
        del f
        gc.collect()
        assert os.listdir(os.path.dirname(uri)) == []

    def test_discard(self, store: LocalArtifactStore) -> None:
        uri = self._uri(store)
        f = store.open(uri, "wb")
        f.write(b"x")
        f.discard()  # type: ignore[attr-defined]
        f.close()  # no effect after discard
        assert os.listdir(os.path.dirname(uri)) == []

    def test_fsync_mode_writes_the_same_bytes(self, tmp_path: Path) -> None:
        store = LocalArtifactStore(tmp_path, fsync=True)
        uri = join_uri(store.new_uri("x"), "f")
        with store.open(uri, "wb") as f:
            f.write(b"durable")
        with store.open(uri) as f:
            assert f.read() == b"durable"

    def test_writer_supports_seek_and_tell(self, store: LocalArtifactStore) -> None:
        uri = self._uri(store)
        with store.open(uri, "wb") as f:
            f.write(b"abcdef")
            assert f.tell() == 6
            f.seek(0)
            f.write(b"X")
        with store.open(uri) as g:
            assert g.read() == b"Xbcdef"

    def test_publishing_over_a_directory_fails_and_cleans_up(
        self, store: LocalArtifactStore
    ) -> None:
        directory = store.new_uri("dir")
        store.makedirs(join_uri(directory, "occupied"))
        f = store.open(directory, "wb")
        f.write(b"x")
        with pytest.raises(OSError):
            f.close()
        assert store.listdir(os.path.dirname(directory)) == [os.path.basename(directory)]
        assert store.listdir(directory) == ["occupied"]
