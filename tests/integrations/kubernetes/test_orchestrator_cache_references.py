"""What a step reaches of its own script (a helper, a class, a constant: the cache key's module
references) gives the same key in the orchestrator pod, which loads the script as
``__wharf_script__``, as on the submitter's machine, where it is ``__main__``: a step a local
run made is cached in the pod."""

from __future__ import annotations

from tests.integrations.kubernetes.test_orchestrator_cache_script import assert_cached_in_the_pod
from tests.integrations.kubernetes.testbed import BedFactory

SCRIPT = """
import json
import sys

from wharf import pipeline, step

FACTOR = 10
NAMES = {"a": (1, 2.5), "b": None}


class Scaler:
    def scale(self, value):
        return helper(value) * len(NAMES)


def helper(value):
    return value * FACTOR


@step
def scaled(value: int) -> int:
    return Scaler().scale(value)


@pipeline
def only_scaled(value: int) -> None:
    scaled(value)


if __name__ == "__main__":
    run = globals()[sys.argv[1]](**json.loads(sys.argv[2]))
    print("RUN", run.id, run.status.value)
"""


def test_script_references_give_the_pod_the_local_key(make_bed: BedFactory) -> None:
    assert_cached_in_the_pod(make_bed({"run.py": SCRIPT}, active_stack="k8s-async"))
