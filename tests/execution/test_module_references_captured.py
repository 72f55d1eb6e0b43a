"""What the functions a step reaches close over is in its module references: a helper made by
a factory (``helper = make_scaler(K)``) or wrapped at module level by a decorator holds values
no source shows, each counted by content under ``LABEL<captures>QUALNAME:VARIABLE`` by the
rules of module-level values; the module's functions captured are followed as functions, other
modules' are no data; the step's own captured values stay in its code hash, not here."""

from __future__ import annotations

from tests.execution.test_module_references import facts, load  # noqa: F401 (a fixture)
from wharf.execution.module_references import module_references, unhashed_references

FACTORIES = """
import functools
import math

K = 3


def make_scaler(k):
    def scale(v):
        return v * k

    return scale


def logged(label):
    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args):
            return [label, f(*args)]

        return wrapper

    return decorate


def plain(v):
    return v


def twice(v):
    return v * 2


def make_composed(inner, outer):
    def composed(v):
        return outer(inner(v))

    return composed


helper = make_scaler(K)
other = make_scaler([1, 2])
labelled = logged("a")(logged("b")(plain))
composed = make_composed(twice, math.floor)


def make_step(value):
    def s(x):
        return helper(x) + other(x) + labelled(x) + composed(x) + value

    return s


s = make_step(100)
"""

SCALE = "make_scaler.<locals>.scale"
WRAPPER = "logged.<locals>.decorate.<locals>.wrapper"


def test_captured_values_count_by_content(load) -> None:  # noqa: F811
    found = facts(load(FACTORIES))
    assert found[f"helper<captures>{SCALE}:k"] == "value:int:3"
    assert found[f"other<captures>{SCALE}:k"] == "value:list:[1,2]"  # one factory, two helpers
    labels = {found[f"labelled<captures>{WRAPPER}:label"]}
    labels.add(found[f"labelled<captures>{WRAPPER}:label#2"])  # one decorator applied twice
    assert labels == {'value:str:"a"', 'value:str:"b"'}
    assert "return v * 2" in found["<closed over>twice"]  # the module's function: followed
    assert not [n for n in found if n.endswith(":outer")]  # another module's: no data
    assert not [n for n in found if ":value" in n]  # the step's own: in its code hash
    assert not unhashed_references(module_references(load(FACTORIES).s))


def test_an_edited_captured_value_changes_only_its_fact(load) -> None:  # noqa: F811
    before = facts(load(FACTORIES))
    after = facts(load(FACTORIES.replace('logged("b")', 'logged("c")')))
    changed = {n for n in before.keys() | after.keys() if before.get(n) != after.get(n)}
    assert len(changed) == 1 and changed.pop().startswith(f"labelled<captures>{WRAPPER}:label")


def test_a_captured_value_a_method_holds(load) -> None:  # noqa: F811
    module = load(
        """
        def make_scaler(k):
            def scale(self, v):
                return v * k

            return scale


        class Model:
            scale = make_scaler(3)


        def s(x):
            return Model().scale(x)
        """
    )
    assert facts(module)["Model.scale<captures>make_scaler.<locals>.scale:k"] == "value:int:3"


def test_a_captured_value_the_key_cannot_read_is_unhashed(load) -> None:  # noqa: F811
    module = load(
        """
        import threading


        def make_guard(lock):
            def guard(v):
                with lock:
                    return v

            return guard


        deep: list = []
        for _ in range(5000):
            deep = [deep]

        guarded = make_guard(threading.Lock())
        nested = make_guard(deep)


        def s(x):
            return guarded(x) + nested(x)
        """
    )
    found = unhashed_references(module_references(module.s))
    owner = "make_guard.<locals>.guard"
    assert len(found) == 2
    assert found[0].startswith(f"'lock' captured by {owner} (module-level 'guarded'), a lock (")
    assert (
        found[1] == f"'lock' captured by {owner} (module-level 'nested'), a list (nested too deep)"
    )
