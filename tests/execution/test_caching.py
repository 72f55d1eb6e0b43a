"""The source dependencies of a cache key: their code as loaded, alike in every process."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from wharf.core.errors import InputError
from wharf.execution.caching import loaded_code_digest, source_dependency

MODULE = '''
import functools

LIMIT = 3


def helper(x, scale=2):
    """Doubles."""
    if x in {"alpha", "beta", "gamma", "delta"}:  # a frozenset constant
        return [i * scale for i in range(LIMIT)]
    return lambda y: y + x


class Model:
    rate = 0.1

    def fit(self, data):
        return sorted(data, key=lambda d: -d)

    @staticmethod
    def make():
        return Model()

    @property
    def size(self):
        return 1

    @functools.cache
    def cached(self):
        return 2
'''


def load(text: str, name: str = "deps_probe") -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(text, f"/nowhere/{name}.py", "exec"), module.__dict__)
    return module


def digests(module: types.ModuleType) -> tuple[str, str, str]:
    return (
        loaded_code_digest(module),
        loaded_code_digest(module.helper),
        loaded_code_digest(module.Model),
    )


DIGESTS = """
import types
from tests.execution.test_caching import MODULE, digests, load
print(digests(load(MODULE)))
"""


def test_the_same_code_digests_alike_in_any_process() -> None:
    # frozenset constants iterate in string-hash order, which changes from process to process
    found = set()
    for seed in ("0", "1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", DIGESTS],
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=Path(__file__).parents[2],
            capture_output=True,
            text=True,
            check=True,
        )
        found.add(done.stdout.strip())
    assert found == {str(digests(load(MODULE)))}


def test_moved_lines_and_another_file_digest_alike() -> None:
    moved = load("\n\n\n# a comment\n" + MODULE, "elsewhere")
    assert digests(moved) == digests(load(MODULE))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("return [i * scale", "return [i * scale + 1"),
        ("scale=2", "scale=3"),
        ('"delta"}', '"epsilon"}'),
        ("y + x", "y - x"),
        ("key=lambda d: -d", "key=lambda d: d"),
        ("return 1", "return 7"),
        ("return 2", "return 8"),
        ("return Model()", "return None"),
    ],
)
def test_a_changed_function_changes_the_digest(old: str, new: str) -> None:
    assert old in MODULE
    before, after = load(MODULE), load(MODULE.replace(old, new))
    assert loaded_code_digest(after) != loaded_code_digest(before)
    changed = after.helper if old in MODULE.split("class Model", maxsplit=1)[0] else after.Model
    assert loaded_code_digest(changed) != loaded_code_digest(getattr(before, changed.__name__))


def test_an_object_default_digests_alike() -> None:
    text = "def f(t=object()):  # its repr has its address\n    return t\n"
    assert loaded_code_digest(load(text).f) == loaded_code_digest(load(text).f)


def test_defaults_and_closed_over_values_count_by_content() -> None:
    """A function's defaults counted by their repr (numpy's summary, an object's repr without
    its state) and its closed-over values not at all: a helper holding other values than
    before, or a source dependency's, kept the key."""
    import numpy as np

    def made(table: object) -> tuple[object, object]:
        def by_default(x: int, t: object = table) -> object:
            return x, t

        def by_closure(x: int) -> object:
            return x, table

        return by_default, by_closure

    zeros, middle = np.zeros(2000), np.zeros(2000)
    middle[1000] = 1.0
    assert repr(zeros) == repr(middle)
    for one, other in [
        (zeros, middle),
        (types.SimpleNamespace(n=1), types.SimpleNamespace(n=2)),
        (1, 2),
    ]:
        for first, second in zip(made(one), made(other), strict=True):
            assert loaded_code_digest(first) != loaded_code_digest(second)
    assert [loaded_code_digest(f) for f in made(middle)] == [
        loaded_code_digest(f) for f in made(middle.copy())
    ]


def test_a_class_counts_its_attributes_of_plain_data() -> None:
    one = load("class Model:\n    rate = 0.1\n\n    def fit(self):\n        return self.rate\n")
    other = load("class Model:\n    rate = 0.2\n\n    def fit(self):\n        return self.rate\n")
    assert loaded_code_digest(one.Model) != loaded_code_digest(other.Model)
    assert loaded_code_digest(one) != loaded_code_digest(other)


WRAPPED = """
import functools


def retry(times):
    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args):
            return [func(*args) for _ in range(times)][-1]

        return wrapper

    return decorate


@functools.lru_cache(maxsize={maxsize})
def cached(x):
    return x


@retry(times={times})
def retried(x):
    return x
"""


def test_what_a_functions_decorators_hold_counts() -> None:
    """Digests unwrapped to the inner function: ``@retry(times=3)`` and ``times=5``, or two
    ``lru_cache`` sizes, gave one digest."""
    base = load(WRAPPED.format(maxsize=8, times=3))
    same = load(WRAPPED.format(maxsize=8, times=3))
    assert digests_of(base) == digests_of(same)
    for edited in (WRAPPED.format(maxsize=16, times=3), WRAPPED.format(maxsize=8, times=5)):
        other = load(edited)
        assert loaded_code_digest(base) != loaded_code_digest(other)
        assert digests_of(base)[1:] != digests_of(other)[1:]


def digests_of(module: types.ModuleType) -> list[str]:
    return [loaded_code_digest(f) for f in (module, module.cached, module.retried)]


CLASSES = """
import enum
import types


class Mode(enum.Enum):
    FAST = {fast}


class Trainer:
    DEFAULTS = types.SimpleNamespace(lr={lr})
"""


def test_a_class_counts_its_attributes_that_are_no_plain_data() -> None:
    """An enum member's value and an object a class holds counted not at all."""

    def each(module: types.ModuleType) -> list[str]:
        return [loaded_code_digest(c) for c in (module, module.Mode, module.Trainer)]

    base = load(CLASSES.format(fast=1, lr=0.1))
    assert each(base) == each(load(CLASSES.format(fast=1, lr=0.1)))
    fast, slow = load(CLASSES.format(fast=2, lr=0.1)), load(CLASSES.format(fast=1, lr=0.2))
    assert loaded_code_digest(base.Mode) != loaded_code_digest(fast.Mode)
    assert loaded_code_digest(base.Trainer) != loaded_code_digest(slow.Trainer)
    assert len({loaded_code_digest(m) for m in (base, fast, slow)}) == 3


def test_recursion_ends_and_what_cannot_be_read_is_said() -> None:
    import threading

    from wharf.execution.held_values import UnhashedValueError

    def outer(n: int) -> object:
        def again(k: int) -> int:  # in its own closure
            return 0 if k == 0 else again(k - 1)

        return again

    assert loaded_code_digest(outer(1)) == loaded_code_digest(outer(2))

    def locked(x: int, lock: object = threading.Lock()) -> int:
        return x

    with pytest.raises(UnhashedValueError, match=r"default of lock of .*locked, a lock: cannot"):
        loaded_code_digest(locked)


def test_the_source_as_read_and_the_code_as_loaded() -> None:
    assert source_dependency(textwrap.dedent, "textwrap:dedent").startswith("def dedent(text):")


def test_a_dependency_without_source_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="Cannot read the source code of 'math'"):
        source_dependency(sys.modules["math"], "math")


def test_a_function_run_many_times_digests_as_before() -> None:
    # the interpreter specializes the bytecode of hot code in place
    module = load(MODULE)
    before = loaded_code_digest(module)
    for i in range(5000):
        module.helper(i)(i)
        module.Model().fit([i, 2])
    assert loaded_code_digest(module) == before


def test_a_comment_in_a_dependency_does_not_count(tmp_path: Path) -> None:
    def dependency(text: str, name: str) -> str:
        (tmp_path / f"{name}.py").write_text(text)
        sys.path.insert(0, str(tmp_path))
        try:
            module = importlib.import_module(name)
        finally:
            sys.path.remove(str(tmp_path))
        return source_dependency(module, name)

    plain = dependency("def f(x):\n    return x\n", "dep_plain")
    commented = dependency("# helpers\ndef f(x):  # identity\n\n    return x\n", "dep_commented")
    changed = dependency("def f(x):\n    return -x\n", "dep_changed")
    assert plain == commented != changed


def test_held_values_count_by_content() -> None:
    """Closed-over values by content: equal values give one digest, values that differ where
    their repr does not (numpy's summary, an object without a repr of its own) two."""
    import threading

    import numpy as np

    from wharf.execution.held_values import held_values

    def digest(value: object) -> str | None:
        held = held_values([("v", value)])
        assert held.unhashed == ()
        return held.digest

    zeros, middle = np.zeros(2000), np.zeros(2000)
    middle[1000] = 1.0
    assert digest(zeros) != digest(middle) and digest(middle) == digest(middle.copy())
    assert digest(np.float32(1)) != digest(np.float64(1)) != digest(1.0)
    assert digest({"a": 1, "b": [zeros]}) == digest({"b": [zeros.copy()], "a": 1})
    assert digest({middle.tobytes()}) != digest({zeros.tobytes()})
    assert digest(types.SimpleNamespace(x=1)) != digest(types.SimpleNamespace(x=2))
    assert digest(b"x") != digest("x") and digest((1,)) != digest([1])
    unhashed = held_values([("lock", threading.Lock()), ("n", 1)])
    assert unhashed.unhashed == (
        "'lock', a lock (cannot be pickled: cannot pickle '_thread.lock' object)",
    )
