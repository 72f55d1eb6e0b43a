"""What a step's code reaches of its own module (the cache key's module references):
followed through functions, classes and decorators, cycles ended, plain values by value,
everything of other modules and builtins left out, and one answer whatever the module is
called (``__main__`` where a script runs, ``__wharf_script__`` where an orchestrator loads
it)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from wharf.execution.module_references import (
    MAX_HASHED_ITEMS,
    global_loads,
    module_references,
    unhashed_references,
)

_names = itertools.count()


@pytest.fixture
def load(tmp_path: Path) -> Iterator[object]:
    loaded: list[str] = []

    def load_text(text: str, name: str | None = None) -> types.ModuleType:
        name = name or f"refs_probe_{next(_names)}"
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(text))
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        loaded.append(name)
        spec.loader.exec_module(module)
        return module

    yield load_text
    for name in loaded:
        sys.modules.pop(name, None)


def facts(module: types.ModuleType, name: str = "s") -> dict[str, str]:
    return dict(module_references(getattr(module, name)))


HELPERS = """
THRESHOLD = 0.5


def a(x):
    return b(x) + THRESHOLD


def b(x):
    return a(x - 1) if x > 10 else x


def unrelated():
    return 1


def s(x):
    return a(x)
"""


def test_helpers_are_followed_through_cycles(load) -> None:
    found = facts(load(HELPERS))
    assert set(found) == {"a", "b", "THRESHOLD"}
    assert "return a(x - 1)" in found["b"]
    assert found["THRESHOLD"] == "value:float:0.5"


def test_an_edit_counts_only_where_the_step_reaches(load) -> None:
    before = facts(load(HELPERS))
    assert facts(load(HELPERS.replace("return 1", "return 2"))) == before
    assert facts(load(HELPERS.replace("x > 10", "x > 11"))) != before
    assert facts(load(HELPERS.replace("THRESHOLD = 0.5", "THRESHOLD = 0.6"))) != before
    assert facts(load(HELPERS.replace("def a(x):", "def a(x):  # a comment"))) == before


def test_the_module_name_does_not_count(load) -> None:
    """The same script as ``__main__`` and as ``__wharf_script__`` gives the same facts."""
    text = (
        HELPERS
        + "\n\nclass K:\n    def m(self):\n        return a(1)\n\n\ndef t():\n    return K()\n"
    )
    assert facts(load(text, "one_name"), "t") == facts(load(text, "other_name"), "t")


def test_a_helper_step_and_decorated_helpers(load) -> None:
    module = load(
        """
        import functools

        from wharf import step


        def wrapping(f):
            @functools.wraps(f)
            def wrapper(*args):
                return f(*args)
            return wrapper


        def bare(f):
            def inner(*args):
                return f(*args)
            return inner


        @step
        def other(x: int) -> int:
            return x + 1


        @wrapping
        def wrapped(x):
            return x * 2


        @bare
        def hidden(x):
            return x * 3


        @step
        def s(x: int) -> int:
            return other.func(x) + wrapped(x) + hidden(x)
        """
    )
    found = facts(module)
    assert "return x + 1" in found["other"]
    assert "return x * 2" in found["wrapped"]  # the function wrapped
    assert "return f(*args)" in found["wrapped"]  # and the decorator's wrapper
    assert "return f(*args)" in found["hidden"]
    assert "return x * 3" in found["<closed over>hidden"]  # wrapped without functools.wraps
    assert not {"functools", "step"} & set(found)  # other modules' code
    assert "def wrapper(*args)" in found["wrapping"]  # a decorator read by a decorator line
    assert "def inner(*args)" in found["bare"]


def test_lambdas_and_locals(load) -> None:
    module = load(
        """
        double = lambda v: v * 2


        def helper(v):
            return v


        def preprocess(v):
            return v


        def s(x):
            preprocess = 3  # a local of the same name
            f = lambda y: helper(y)
            return [double(f(i)) for i in range(x)][0] + preprocess
        """
    )
    found = facts(module)
    assert set(found) == {"double", "helper"}
    assert "lambda v: v * 2" in found["double"]


def test_a_class_counts_with_its_methods_and_their_helpers(load) -> None:
    text = """
        def scale(v):
            return v * 10


        class Base:
            def base(self):
                return 1


        class Model(Base):
            rate = 0.1

            def fit(self, v):
                return scale(v)

            @staticmethod
            def make():
                return Model()

            @property
            def size(self):
                return LIMIT


        LIMIT = 4


        def s(x):
            return Model().fit(x)
        """
    found = facts(load(text))
    assert set(found) == {"Model", "scale", "LIMIT", "Model<base>Base"}
    assert "def fit(self, v)" in found["Model"]
    assert found != facts(load(text.replace("v * 10", "v * 11")))
    assert found != facts(load(text.replace("return 1", "return 2")))


def test_other_modules_and_builtins_are_not_followed(load) -> None:
    module = load(
        """
        import json
        import os
        from os.path import join

        from wharf import step

        PATHS = {"a": [1, 2.5, None, True, b"x", ("t",), frozenset({3})]}
        BIG = list(range(100_000))
        LONG = "x" * 1_000_000
        OBJECT = object()


        def s(x):
            return json.dumps([os.sep, join("a", "b"), len(BIG), LONG, OBJECT, PATHS, step])
        """
    )
    found = facts(module)
    assert set(found) == {"PATHS", "BIG", "LONG", "OBJECT"}
    assert found["OBJECT"].startswith("held:object:")  # by its pickled bytes
    assert found["PATHS"].startswith("value:dict:")
    assert found["BIG"].startswith("sha256:list:")  # by its content's digest
    assert found["LONG"].startswith("sha256:str:")
    assert unhashed_references(found.items()) == []


def test_one_element_of_a_large_constant_counts(load) -> None:
    """A constant too large to hold whole counted by its type alone: editing one element of
    it kept the step's key."""
    text = """
        THRESHOLDS = [0.5] * 5000
        LIMITS = {f"k{i}": i for i in range(5000)}
        LONG = "x" * 200_000


        def s():
            return THRESHOLDS, LIMITS, LONG
        """
    before = facts(load(text))
    for old, new in [
        ("THRESHOLDS = [0.5] * 5000", "THRESHOLDS = [0.5] * 2500 + [0.6] + [0.5] * 2499"),
        ("for i in range(5000)", "for i in range(5000) if i != 2500"),
        ('"x" * 200_000', '"x" * 100_000 + "y" + "x" * 99_999'),
    ]:
        assert old in text
        after = facts(load(text.replace(old, new)))
        assert after != before and unhashed_references(after.items()) == []
    assert facts(load(text)) == before


def test_a_value_too_large_to_hash_is_unhashed(load) -> None:
    module = load(f"HUGE = [0] * {MAX_HASHED_ITEMS + 1}\n\n\ndef s():\n    return HUGE\n")
    (unhashed,) = unhashed_references(module_references(module.s))
    assert unhashed.startswith("module-level 'HUGE', a list (over 2,000,000 elements")


def test_only_global_loads_are_names() -> None:
    def f(x):
        y = x.attribute  # an attribute, not a global
        return len(y) + GLOBAL  # noqa: F821

    assert global_loads(f.__code__) == {"len", "GLOBAL"}


def test_a_value_nested_too_deep_is_unhashed(load) -> None:
    module = load(
        "DEEP = []\nfor _ in range(5000):\n    DEEP = [DEEP]\n\n\ndef s():\n    return DEEP\n"
    )
    assert unhashed_references(module_references(module.s)) == [
        "module-level 'DEEP', a list (nested too deep)"
    ]


OBJECTS = """
import dataclasses
import re
from decimal import Decimal

import numpy as np


@dataclasses.dataclass(frozen=True)
class Config:
    lr: float

    def scaled(self):
        return self.lr * 2


WEIGHTS = np.array([1.0, 2.0, 3.0])
CONFIG = Config(lr=0.1)
PATTERN = re.compile("a+")
VOCAB = frozenset({"a", ("b", Decimal("1.5"))})


def s():
    return WEIGHTS, CONFIG, PATTERN, VOCAB
"""


def test_module_level_objects_count_by_content(load) -> None:
    """An array, an instance, a compiled pattern or a set holding objects was left out of the
    key: editing it kept the step's key."""
    before = facts(load(OBJECTS))
    assert set(before) == {"WEIGHTS", "CONFIG", "PATTERN", "VOCAB"}
    assert all(fact.startswith("held:") for fact in before.values())
    assert facts(load(OBJECTS)) == before
    for old, new in [
        ("[1.0, 2.0, 3.0]", "[1.0, 2.0, 4.0]"),
        ("Config(lr=0.1)", "Config(lr=0.2)"),
        ("self.lr * 2", "self.lr * 3"),  # the instance's class, defined beside the step
        ('re.compile("a+")', 're.compile("b+")'),
        ('Decimal("1.5")', 'Decimal("2.5")'),
    ]:
        assert old in OBJECTS
        after = facts(load(OBJECTS.replace(old, new)))
        assert after != before and unhashed_references(after.items()) == []


def test_an_instance_of_the_module_s_class_does_not_count_its_module_name(load) -> None:
    """Pickled, an instance names its class's module: ``__main__`` where a script runs,
    ``__wharf_script__`` where an orchestrator loads it. Both must give one key."""
    assert facts(load(OBJECTS, "one_script")) == facts(load(OBJECTS, "other_script"))


def test_what_is_no_data_is_left_out(load) -> None:
    """Loggers, modules, code of other modules and typing's constructs are no data: they
    neither count nor leave the step uncached."""
    module = load(
        """
        import functools
        import logging
        from typing import Optional, TypeVar

        import numpy as np

        from wharf import step

        logger = logging.getLogger(__name__)
        adapter = logging.LoggerAdapter(logger, {"run": 1})
        T = TypeVar("T")
        MaybeInt = Optional[int]
        Vector = list[float]
        Either = int | str
        cached_sum = functools.lru_cache(maxsize=8)(np.sum)


        def s():
            logger.info("x")
            return adapter, T, MaybeInt, Vector, Either, np, np.sum, cached_sum, step
        """
    )
    assert facts(module) == {}


def test_an_object_that_cannot_be_pickled_is_unhashed(load, tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_text("x")
    module = load(
        f"""
        import threading

        LOCK = threading.Lock()
        HANDLE = open({str(data)!r})


        def s():
            return LOCK, HANDLE.read()
        """
    )
    unhashed = unhashed_references(module_references(module.s))
    module.HANDLE.close()
    assert [u.split(" (")[0] for u in unhashed] == [
        "module-level 'HANDLE', a TextIOWrapper",
        "module-level 'LOCK', a lock",
    ]
    assert all("cannot be pickled" in u for u in unhashed)


def test_an_object_holding_a_set_counts_alike_in_every_process(tmp_path: Path) -> None:
    """A set pickles in the order string hashing gives it, which ``PYTHONHASHSEED`` varies
    between processes: the key of a step reading ``CONFIG = Config(tags={...})`` changed at
    every run, never cached."""
    script = tmp_path / "sets_probe.py"
    script.write_text(
        textwrap.dedent(
            """
            import dataclasses

            from wharf.execution.module_references import module_references


            @dataclasses.dataclass
            class Config:
                tags: set


            CONFIG = Config(tags={"alpha", "beta", "gamma", "delta", "epsilon"})


            def s():
                return CONFIG


            print(module_references(s))
            """
        )
    )
    printed = set()
    for seed in ("1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, check=True
        )
        printed.add(done.stdout)
    assert len(printed) == 1 and "held:Config:" in printed.pop()
