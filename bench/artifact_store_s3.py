"""The S3 artifact store against raw s3fs, on the same moto server in the same run.

Two workloads, each timed as save + load, best of ``--repeat`` (Wharf and raw alternating):

- one 100 MiB numpy array: Wharf's ``save_artifact`` / ``load_artifact`` through
  ``FsspecArtifactStore`` (hash computed while writing, one object) against raw s3fs writing
  ``np.save`` to ``fs.open(key, "wb")`` and reading it back with ``np.load``;
- 1,000 small artifacts (a short list each): Wharf against raw s3fs ``pipe``/``cat`` of the
  same JSON bytes, one object each.

Goal: Wharf within 1.3x of raw for the big array and within 2x for the small ones. The server is
``python -m moto.server`` on 127.0.0.1 (in-memory), so the figures are dominated by moto's and
the HTTP stack's CPU on this host, not by a network.

    python bench/artifact_store_s3.py [--repeat 3] [--small 1000] [--out results/s3.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.artifacts.s3_server
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from host_speed import host_figures  # noqa: E402
from tests.artifacts.s3_server import CREDENTIALS, MotoServer  # noqa: E402

from wharf.artifacts import default_registry, load_artifact, save_artifact  # noqa: E402
from wharf.artifacts.fsspec_store import FsspecArtifactStore  # noqa: E402


def best_of_alternating(repeat: int, wharf: Any, raw: Any) -> tuple[float, float]:
    """Best wall times of ``wharf`` and ``raw``, run alternately so that the host's drift
    (a shared machine) weighs on both alike."""
    times: dict[Any, list[float]] = {wharf: [], raw: []}
    for _ in range(repeat):
        for work in (wharf, raw):
            began = time.perf_counter()
            work()
            times[work].append(time.perf_counter() - began)
    return min(times[wharf]), min(times[raw])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import os

    import s3fs

    os.environ.update(CREDENTIALS)
    server = MotoServer()
    try:
        bucket = server.new_bucket()
        store = FsspecArtifactStore(
            f"s3://{bucket}/wharf", options={"endpoint_url": server.endpoint}
        )
        raw = s3fs.S3FileSystem(
            endpoint_url=server.endpoint, skip_instance_cache=True, use_listings_cache=False
        )
        registry = default_registry()
        array = np.random.default_rng(0).random(args.mib * 2**20 // 8)

        def wharf_big() -> None:
            saved = save_artifact(array, store, store.new_uri("big"), registry)
            load_artifact(store, saved.uri, saved.data_type, saved.materializer)
            store.rmtree(saved.uri)

        def raw_big() -> None:
            key = f"{bucket}/raw/big.npy"
            with raw.open(key, "wb") as f:
                np.save(f, array, allow_pickle=False)
            with raw.open(key, "rb") as f:
                np.load(f, allow_pickle=False)
            raw.rm(key)

        values = [[i, i + 1, i + 2] for i in range(args.small)]
        payloads = [json.dumps(v).encode() for v in values]

        def wharf_small() -> None:
            saved = [save_artifact(v, store, store.new_uri("small"), registry) for v in values]
            for s in saved:
                load_artifact(store, s.uri, s.data_type, s.materializer)

        def raw_small() -> None:
            keys = [f"{bucket}/raw/small/{i}" for i in range(len(payloads))]
            for key, data in zip(keys, payloads, strict=True):
                raw.pipe_file(key, data)
            for key in keys:
                raw.cat_file(key)

        wharf_big()  # warm both paths (imports, connections)
        raw_big()
        big_wharf, big_raw = best_of_alternating(args.repeat, wharf_big, raw_big)
        small_wharf, small_raw = best_of_alternating(args.repeat, wharf_small, raw_small)
        figures = {
            "big_mib": args.mib,
            "big_wharf_s": big_wharf,
            "big_raw_s": big_raw,
            "small_count": args.small,
            "small_wharf_s": small_wharf,
            "small_raw_s": small_raw,
        }
    finally:
        server.stop()
    figures["big_ratio"] = round(figures["big_wharf_s"] / figures["big_raw_s"], 2)
    figures["small_ratio"] = round(figures["small_wharf_s"] / figures["small_raw_s"], 2)
    figures["small_wharf_ms_per_artifact"] = round(1000 * figures["small_wharf_s"] / args.small, 2)
    figures["small_raw_ms_per_artifact"] = round(1000 * figures["small_raw_s"] / args.small, 2)
    result = {"benchmark": "artifact_store_s3", "figures": figures, "host": host_figures()}
    for name, value in figures.items():
        print(f"{name:30} {value:.3f}" if isinstance(value, float) else f"{name:30} {value}")
    print(
        f"goal: big <= 1.3x raw ({figures['big_ratio']}x), small <= 2x ({figures['small_ratio']}x)"
    )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
