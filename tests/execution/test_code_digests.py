"""Remembered file hashes: used only for files unchanged since (and not racily clean), kept
across processes in one record per source root, and harmless when missing or malformed."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from wharf.execution.code_archive import list_files, scan
from wharf.execution.code_digests import FileHashes

HOUR_AGO = time.time() - 3600


def old_file(path: Path, text: str) -> os.stat_result:
    path.write_text(text)
    os.utime(path, (HOUR_AGO, HOUR_AGO))
    return path.stat()


def test_a_hash_is_remembered_for_an_unchanged_file(tmp_path: Path) -> None:
    root = tmp_path / "code"
    root.mkdir()
    info = old_file(root / "a.py", "A = 1\n")
    known = FileHashes.load(tmp_path / "hashes", root)
    assert known.get("a.py", info) is None
    known.put("a.py", info, b"h" * 32)
    known.save()
    again = FileHashes.load(tmp_path / "hashes", root)
    assert again.get("a.py", (root / "a.py").stat()) == b"h" * 32
    assert FileHashes.load(tmp_path / "hashes", tmp_path).get("a.py", info) is None  # other root


def test_a_changed_or_racily_clean_file_is_read_again(tmp_path: Path) -> None:
    root = tmp_path / "code"
    root.mkdir()
    fresh = root / "fresh.py"
    fresh.write_text("x\n")  # modified just now: within a tick of being hashed
    info = old_file(root / "a.py", "A = 1\n")
    known = FileHashes.load(tmp_path / "hashes", root)
    known.put("a.py", info, b"h" * 32)
    known.put("fresh.py", fresh.stat(), b"f" * 32)
    known.save()
    again = FileHashes.load(tmp_path / "hashes", root)
    assert again.get("fresh.py", fresh.stat()) is None
    old_file(root / "a.py", "A = 22\n")  # other size and change time
    assert again.get("a.py", (root / "a.py").stat()) is None


def test_a_malformed_record_remembers_nothing(tmp_path: Path) -> None:
    root = tmp_path / "code"
    root.mkdir()
    info = old_file(root / "a.py", "A = 1\n")
    known = FileHashes.load(tmp_path / "hashes", root)
    known.put("a.py", info, b"h" * 32)
    known.save()
    (record,) = (tmp_path / "hashes").iterdir()
    record.write_text("{not json")
    assert FileHashes.load(tmp_path / "hashes", root).get("a.py", info) is None


def test_scan_uses_remembered_hashes_and_records_new_ones(tmp_path: Path) -> None:
    root = tmp_path / "code"
    root.mkdir()
    info = old_file(root / "a.py", "A = 1\n")
    old_file(root / "b.py", "B = 2\n")
    honest = scan(root, list_files(root)).digest
    known = FileHashes.load(tmp_path / "hashes", root)
    assert scan(root, list_files(root), known=known).digest == honest
    known.save()
    remembered = FileHashes.load(tmp_path / "hashes", root)
    real = hashlib.sha256(b"A = 1\n").digest()
    assert remembered.get("a.py", info) == real
    # A remembered hash is what the scan uses (it does not read the file again): forge one.
    remembered.put("a.py", info, b"\0" * 32)
    assert scan(root, list_files(root), known=remembered).digest != honest
