"""What a step's definitions read where they run, which no code object keeps, is in its module
references: the expressions of decorators (the step's, a helper's, a class's, a method's),
defaults, class keywords and class bodies, by the same rules as the names code loads; never
the locals of the bodies, nor annotations."""

from __future__ import annotations

import textwrap

from tests.execution.test_module_references import facts, load  # noqa: F401 (a fixture)
from wharf.execution.module_references import (
    module_references,
    read_where_defined,
    unhashed_references,
)

DEFINITIONS = """
import dataclasses
import functools

from wharf import step

FACTOR = 2
TIMES = 3
SIZE = 8
FROZEN = True
LAYERS = [64, 32]
K = 10
KW = 0.5
DEBUG = False
LAMBDA_DEFAULT = 1
SHIFT = 7
rows = 99
UNRELATED = 1


def scaled(factor):
    def decorate(f):
        return f
    return decorate


@scaled(TIMES)
def helper(x):
    return x


class Base:
    def __init_subclass__(cls, size=0):
        cls.size = size


@dataclasses.dataclass(frozen=FROZEN)
class Model(Base, size=SIZE):
    layers = LAYERS
    if DEBUG:
        extra = 1
    shifted = [v + SHIFT for v in range(2)]
    pick = lambda self, v, d=LAMBDA_DEFAULT: v + d  # noqa: E731

    @functools.lru_cache(maxsize=SIZE)
    def scale(self, value, k=K, *, w=KW):
        rows = value * k * w
        return rows


@step
@scaled(FACTOR)
def s(x: int) -> int:
    return helper(x) + Model().scale(x)
"""


def test_decorators_defaults_and_class_bodies_count(load) -> None:  # noqa: F811
    found = facts(load(DEFINITIONS))
    assert found["FACTOR"] == "value:int:2"  # the step's own decorator
    assert "def decorate(f)" in found["scaled"]
    assert found["TIMES"] == "value:int:3"  # a helper's decorator
    assert found["FROZEN"] == "value:bool:true"  # a class's decorator
    assert found["SIZE"] == "value:int:8"  # a class keyword, a method's decorator
    assert "64" in found["LAYERS"]  # the class body
    assert found["DEBUG"] == "value:bool:false"
    assert found["SHIFT"] == "value:int:7"  # a comprehension run by the class body
    assert found["LAMBDA_DEFAULT"] == "value:int:1"
    assert found["K"] == "value:int:10"  # a method's defaults
    assert found["KW"] == "value:float:0.5"
    assert "UNRELATED" not in found
    assert "rows" not in found  # a method's local, never a definition's read
    assert not {"step", "functools", "dataclasses"} & set(found)  # other modules' code


def test_an_edited_constant_of_a_class_body_changes_the_references(load) -> None:  # noqa: F811
    before = facts(load(DEFINITIONS))
    after = facts(load(DEFINITIONS.replace("LAYERS = [64, 32]", "LAYERS = [64, 16]")))
    assert before["LAYERS"] != after["LAYERS"]
    assert {k: v for k, v in before.items() if k != "LAYERS"} == {
        k: v for k, v in after.items() if k != "LAYERS"
    }


def test_an_unpicklable_object_a_class_body_reads_is_unhashed(load) -> None:  # noqa: F811
    module = load(
        """
        import threading

        LOCK = threading.Lock()


        class Worker:
            lock = LOCK


        def s():
            return Worker.lock.locked()
        """
    )
    found = unhashed_references(module_references(module.s))
    assert len(found) == 1 and found[0].startswith("module-level 'LOCK', a lock (")


def test_a_lambda_reads_its_body_without_its_parameters(load) -> None:  # noqa: F811
    module = load(
        """
        v = 1
        OFFSET = 2


        def order(key):
            def decorate(f):
                return f
            return decorate


        @order(key=lambda v, *rest, **named: v + OFFSET)
        def s():
            return 0
        """
    )
    assert set(facts(module)) == {"order", "OFFSET"}


def test_what_has_no_source_reads_nothing() -> None:
    namespace: dict[str, object] = {"K": 1}
    exec(textwrap.dedent("def f(k=K):\n    return k\nclass C:\n    a = K\n"), namespace)
    assert read_where_defined(namespace["f"]) == set()
    assert read_where_defined(namespace["C"]) == set()
    assert read_where_defined(lambda k=1: k) == set()


MARGIN = '''
K = 10


def make():
    def inner(k=K):
        return k, """
at the margin
"""

    return inner


helper = make()


def s():
    return helper()
'''


def test_an_indented_source_with_a_string_at_the_margin(load) -> None:  # noqa: F811
    """A nested function's source that cannot be dedented (a string's lines at column 0):
    its defaults count all the same."""
    assert facts(load(MARGIN))["K"] == "value:int:10"
