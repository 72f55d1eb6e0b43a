"""Peak memory of saving and loading one big artifact through the artifact stores.

For a ``bytes`` object, a float64 numpy array and a dict holding such an array (pickled by the
fallback materializer), ``--mib`` MiB each, on the S3 store (moto server, or ``--endpoint``)
and on the local store, one fresh child process per operation
measures:

- ``rss_extra_mib``: the peak resident set size during the call above the RSS just before it
  (Linux ``VmHWM``, reset through ``/proc/self/clear_refs``), which is what an OOM killer sees;
- ``traced_extra_mib``: the peak of Python/numpy allocations during the call (tracemalloc).

A save's extra memory should be a bounded buffer (the upload part, 16 MiB by default), not
a multiple of the object; a load's is the loaded object itself (1x) plus such a buffer. Goal:
save extra <= 64 MiB, load extra <= 1x + 64 MiB. The object itself, made before the call, is
not counted in a save. The moto server is another process: not counted either.

    python bench/s3_artifact_memory.py [--mib 300] [--endpoint URL --bucket B] [--out F.json]

The children import ``wharf`` as this process does: ``PYTHONPATH=<checkout>/src`` measures
another version (e.g. the ``git archive`` of an older commit).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.artifacts.s3_server
sys.path.insert(0, str(Path(__file__).resolve().parent))

MIB = 2**20
GOAL_BUFFER_MIB = 64
VALUES = ("bytes", "numpy", "pickle")


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        match = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.MULTILINE)
    assert match is not None, field
    return int(match.group(1)) / 1024


def _store(kind: str, location: str) -> Any:
    from wharf.artifacts import LocalArtifactStore
    from wharf.artifacts.fsspec_store import FsspecArtifactStore

    if kind == "local":
        return LocalArtifactStore(location)
    bucket, endpoint = location.split("@", 1)
    return FsspecArtifactStore(f"s3://{bucket}/wharf", options={"endpoint_url": endpoint})


def _value(value_kind: str, mib: int) -> Any:
    import numpy as np

    array = np.random.default_rng(0).random(mib * MIB // 8)
    if value_kind == "numpy":
        return array
    if value_kind == "pickle":
        return {"weights": array}  # no materializer of its own: cloudpickle
    data = array.tobytes()
    del array
    return data


def child(args: argparse.Namespace) -> None:
    """One measured operation, in this fresh process; prints its figures as JSON."""
    from wharf.artifacts import default_registry, load_artifact, save_artifact

    store = _store(args.store, args.location)
    registry = default_registry()
    # Warm up: imports, the connection, the materializer's module.
    small = _value(args.value, 1)
    warm = save_artifact(small, store, store.new_uri("warm"), registry)
    load_artifact(store, warm.uri, warm.data_type, warm.materializer)
    del small
    value = _value(args.value, args.mib) if args.op == "save" else None
    result: dict[str, Any] = {}
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = _status_mib("VmRSS")
    tracemalloc.start()
    if args.op == "save":
        saved = save_artifact(value, store, store.new_uri("big"), registry)
        result["saved"] = [saved.uri, saved.data_type, saved.materializer]
    else:
        uri, data_type, materializer = args.saved
        loaded = load_artifact(store, uri, data_type, materializer)
        if args.value == "pickle":
            loaded = loaded["weights"]
        assert len(memoryview(loaded).cast("B")) == args.mib * MIB
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    result["rss_extra_mib"] = round(_status_mib("VmHWM") - before, 1)
    result["traced_extra_mib"] = round(traced / MIB, 1)
    print(json.dumps(result))


def _run_child(*argv: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", *argv],
        check=True,
        capture_output=True,
        text=True,
    )
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=300)
    parser.add_argument("--endpoint", default=None, help="an S3 endpoint (default: start moto)")
    parser.add_argument("--bucket", default=None, help="with --endpoint: an existing bucket")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--store", choices=("s3", "local"), help=argparse.SUPPRESS)
    parser.add_argument("--location", help=argparse.SUPPRESS)
    parser.add_argument("--value", choices=VALUES, help=argparse.SUPPRESS)
    parser.add_argument("--op", choices=("save", "load"), help=argparse.SUPPRESS)
    parser.add_argument("--saved", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    from host_speed import host_figures
    from tests.artifacts.s3_server import CREDENTIALS, MotoServer

    os.environ.update({k: os.environ.get(k, v) for k, v in CREDENTIALS.items()})
    server = None
    if args.endpoint is None:
        server = MotoServer()
        endpoint, bucket = server.endpoint, server.new_bucket()
    else:
        endpoint, bucket = args.endpoint, args.bucket
        if bucket is None:
            parser.error("--endpoint needs --bucket")
    figures: dict[str, Any] = {"mib": args.mib}
    try:
        with tempfile.TemporaryDirectory() as local_root:
            locations = {"s3": f"{bucket}@{endpoint}", "local": local_root}
            for store, location in locations.items():
                for value in VALUES:
                    common = ["--store", store, "--location", location, "--value", value]
                    common += ["--mib", str(args.mib)]
                    save = _run_child(*common, "--op", "save")
                    load = _run_child(*common, "--op", "load", "--saved", *save.pop("saved"))
                    for op, result in (("save", save), ("load", load)):
                        for name, mib in result.items():
                            key = f"{store}_{value}_{op}_{name}"
                            figures[key] = mib
                            ratio = mib / args.mib
                            print(f"{key:36} {mib:8.1f} MiB  ({ratio:.2f}x the object)")
    finally:
        if server is not None:
            server.stop()
    saves = [v for k, v in figures.items() if "_save_rss" in k]
    loads = [v for k, v in figures.items() if "_load_rss" in k]
    figures["worst_save_rss_extra_mib"] = max(saves)
    figures["worst_load_rss_extra_mib"] = max(loads)
    print(
        f"goal: save extra <= {GOAL_BUFFER_MIB} MiB (worst {max(saves):.1f}), load extra <= "
        f"{args.mib + GOAL_BUFFER_MIB} MiB (worst {max(loads):.1f})"
    )
    result = {"benchmark": "s3_artifact_memory", "figures": figures, "host": host_figures()}
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
