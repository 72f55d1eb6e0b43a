"""Code archive of a generated project: packaging + upload, and a re-run with unchanged code.

Generates a project of ``--files`` source files (nested packages, 1-8 KiB each, plus ignored
files a ``.gitignore`` excludes), then times Wharf's submit-side work on the local artifact
store (``wharf.execution.code_archive.ship_code``: list the files, hash them, build and upload
the archive when its digest is new):

- ``first``: packaging + upload of the new code base;
- ``unchanged``: the same call again with nothing changed, file hashes remembered from the
  first (the goal: <= 50 ms of Wharf time at the 40 ms host reference; nothing is written);
- the same two with the project as a git repository (files listed by ``git ls-files``);
- on the executing side: ``fetch_cold`` (download, verify, unpack into the cache) and
  ``fetch_warm`` (cache hit).

Each figure is the median of ``--repeat`` timings (the first upload: of fresh stores); the
``_at_reference`` figures are scaled by the mean of the host reference loop
(``bench/host_speed.py``) taken before and after.

    python bench/code_archive.py [--files 2000] [--repeat 7] [--out results/code_archive.json]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_speed import host_figures

from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import PipelineSpec
from wharf.execution.code_archive import list_files, scan, ship_code
from wharf.execution.code_digests import RACY_SECONDS, FileHashes
from wharf.execution.code_fetch import cached_code

GOAL_MS = 50.0
REFERENCE_MS = 40.0


def generate(root: Path, files: int, seed: int = 7) -> int:
    """``files`` source files under ``root`` (plus ignored ones); returns their bytes."""
    rng = random.Random(seed)
    total = 0
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    for i in range(files - 1):
        package = root / f"pkg{i % 20}" / f"sub{(i // 20) % 10}"
        package.mkdir(parents=True, exist_ok=True)
        size = rng.randint(1024, 8 * 1024)
        text = "".join(f"VALUE_{j} = {rng.random()!r}\n" for j in range(size // 30))
        (package / f"module_{i}.py").write_text(text)
        total += len(text)
    (root / "build").mkdir()
    for i in range(200):  # ignored: never listed, never read
        (root / "build" / f"out_{i}.o").write_bytes(b"\0" * 4096)
        (root / f"run_{i}.log").write_text("log\n")
    return total


def timed(call: Callable[[], Any]) -> float:
    began = time.perf_counter()
    call()
    return (time.perf_counter() - began) * 1000


def median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def measure(root: Path, work: Path, repeat: int) -> dict[str, float]:
    spec = PipelineSpec(name="bench")
    firsts, unchanged, listing, hashing = [], [], [], []
    store = LocalArtifactStore(work / "artifacts-0")
    options: dict[str, Any] = {"travels": True, "root": root}
    for i in range(repeat):
        store = LocalArtifactStore(work / f"artifacts-{i}")
        hashes = {"hashes_dir": work / f"hashes-{i}"}  # nothing remembered yet
        firsts.append(timed(lambda s=store, h=hashes: ship_code(spec, s, **options, **h)))  # type: ignore[misc]
    options["hashes_dir"] = work / "hashes-0"
    time.sleep(RACY_SECONDS)  # files hashed within a tick of being written are re-read once
    ship_code(spec, store, **options)  # as a second run (seconds later) finds them
    for _ in range(repeat):
        unchanged.append(timed(lambda: ship_code(spec, store, **options)))
        began = time.perf_counter()
        names = list_files(root)
        listing.append((time.perf_counter() - began) * 1000)
        known = FileHashes.load(work / "hashes-0", root)
        began = time.perf_counter()
        scan(root, names, known=known)
        hashing.append((time.perf_counter() - began) * 1000)
    shipped = ship_code(spec, store, travels=True, root=root)
    assert shipped.code is not None
    ref = shipped.code
    cold = []
    for i in range(repeat):
        cache = work / f"cache-{i}"
        cold.append(timed(lambda c=cache: cached_code(store, ref, c)))  # type: ignore[misc]
    warm = [timed(lambda: cached_code(store, ref, work / "cache-0")) for _ in range(repeat)]
    return {
        "first_ms": median(firsts),
        "unchanged_ms": median(unchanged),
        "unchanged_list_ms": median(listing),
        "unchanged_stat_and_digest_ms": median(hashing),
        "fetch_cold_ms": median(cold),
        "fetch_warm_ms": median(warm),
        "archive_bytes": Path(ref.uri).stat().st_size,
        "files": ref.files,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results/code_archive.json"
    )
    args = parser.parse_args()
    host = host_figures()
    results: dict[str, Any] = {"benchmark": "code_archive", "host": host, "files": args.files}
    with tempfile.TemporaryDirectory(prefix="wharf-bench-code-") as tmp:
        base = Path(tmp)
        project = base / "project"
        project.mkdir()
        results["source_bytes"] = generate(project, args.files)
        results["plain"] = measure(project, base / "plain", args.repeat)
        git = ["git", "-C", str(project), "-c", "user.email=b@example.com", "-c", "user.name=b"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "bench"], check=True)
        results["git"] = measure(project, base / "git", args.repeat)
        shutil.rmtree(project / ".git")
    # The host drifts within minutes: scale by the mean of its speed before and after.
    host["reference_loop_ms_after"] = host_figures()["reference_loop_ms"]
    reference = (host["reference_loop_ms"] + host["reference_loop_ms_after"]) / 2
    scale = REFERENCE_MS / reference
    for mode in ("plain", "git"):
        figures = results[mode]
        figures["unchanged_ms_at_reference"] = round(figures["unchanged_ms"] * scale, 2)
        figures["unchanged_within_goal"] = figures["unchanged_ms_at_reference"] <= GOAL_MS
        print(
            f"{mode:5} {figures['files']} files, archive {figures['archive_bytes'] / 1024:.0f} KiB: "
            f"first {figures['first_ms']:.1f} ms, unchanged {figures['unchanged_ms']:.1f} ms "
            f"(list {figures['unchanged_list_ms']:.1f} + stat/digest "
            f"{figures['unchanged_stat_and_digest_ms']:.1f}; "
            f"{figures['unchanged_ms_at_reference']:.1f} ms at the {REFERENCE_MS:.0f} ms reference, "
            f"goal {GOAL_MS:.0f}), fetch cold {figures['fetch_cold_ms']:.1f} ms, "
            f"warm {figures['fetch_warm_ms']:.2f} ms"
        )
    print(
        f"host reference loop {host['reference_loop_ms']} ms before, "
        f"{host['reference_loop_ms_after']} ms after (load {host['load_average_1m']})"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
