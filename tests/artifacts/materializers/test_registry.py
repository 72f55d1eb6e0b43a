from __future__ import annotations

import enum
import re
import threading
import warnings
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pytest

from wharf.artifacts import (
    Materializer,
    MaterializerRegistry,
    default_registry,
    materializer_path,
)
from wharf.artifacts.materializers import (
    BuiltInContainerMaterializer,
    BuiltInMaterializer,
    CloudpickleMaterializer,
)
from wharf.artifacts.materializers.numpy_materializer import NumpyMaterializer
from wharf.artifacts.materializers.pandas_materializer import PandasMaterializer
from wharf.core.errors import MaterializationError


class Base:
    pass


class Child(Base):
    pass


class GrandChild(Child):
    pass


class Mixin:
    pass


class Diamond(Mixin, Child):
    pass


class _Noop(Materializer):
    def save(self, data: Any) -> None:
        raise NotImplementedError

    def load(self, data_type: type[Any]) -> Any:
        raise NotImplementedError


class BaseMaterializer(_Noop):
    ASSOCIATED_TYPES = (Base,)


class ChildMaterializer(_Noop):
    ASSOCIATED_TYPES = (Child,)


class MixinMaterializer(_Noop):
    ASSOCIATED_TYPES = (Mixin,)


class PickyDictMaterializer(_Noop):
    """Takes only dicts with a "picky" key."""

    ASSOCIATED_TYPES = (dict,)

    @classmethod
    def can_save(cls, value: object) -> bool:
        return isinstance(value, dict) and "picky" in value


class Outer:
    class Inner:
        pass


class NotAMaterializer:
    pass


class TestDefaultSelection:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (1, BuiltInMaterializer),
            (True, BuiltInMaterializer),
            (1.5, BuiltInMaterializer),
            ("s", BuiltInMaterializer),
            (b"b", BuiltInMaterializer),
            (None, BuiltInMaterializer),
            ({"a": 1}, BuiltInContainerMaterializer),
            ([1], BuiltInContainerMaterializer),
            ((1,), BuiltInContainerMaterializer),
            ({1}, BuiltInContainerMaterializer),
            (frozenset(), BuiltInContainerMaterializer),
            (np.arange(2), NumpyMaterializer),
            (np.float64(1.0), NumpyMaterializer),  # a float subclass: numpy.generic comes first
            (np.str_("x"), NumpyMaterializer),  # a str subclass the built-in one declines
            (pd.DataFrame(), PandasMaterializer),
            (pd.Series(dtype=float), PandasMaterializer),
        ],
    )
    def test_for_value(self, registry: MaterializerRegistry, value: Any, expected: type) -> None:
        assert registry.for_value(value) is expected

    @pytest.mark.parametrize(
        ("data_type", "expected"),
        [
            (int, BuiltInMaterializer),
            (bool, BuiltInMaterializer),
            (type(None), BuiltInMaterializer),
            (dict, BuiltInContainerMaterializer),
            (list[int], BuiltInContainerMaterializer),
            (dict[str, list[int]], BuiltInContainerMaterializer),
            (np.ndarray, NumpyMaterializer),
            (pd.DataFrame, PandasMaterializer),
        ],
    )
    def test_for_type(self, registry: MaterializerRegistry, data_type: Any, expected: type) -> None:
        assert registry.for_type(data_type) is expected

    def test_for_type_of_unknown_or_non_class_types_is_the_fallback(
        self, registry: MaterializerRegistry
    ) -> None:
        with pytest.warns(UserWarning):
            assert registry.for_type(Base) is CloudpickleMaterializer
        with pytest.warns(UserWarning, match=re.escape("'typing:Any'")):
            assert registry.for_type(Any) is CloudpickleMaterializer
        with pytest.warns(UserWarning, match=re.escape("'int | None'")):
            assert registry.for_type(int | None) is CloudpickleMaterializer

    def test_int_enum_uses_the_builtin_materializer_through_its_int_base(
        self, registry: MaterializerRegistry
    ) -> None:
        class Level(enum.IntEnum):
            LOW = 1

        assert registry.for_value(Level.LOW) is BuiltInMaterializer

    def test_named_tuple_uses_the_container_materializer(
        self, registry: MaterializerRegistry
    ) -> None:
        class Pair(NamedTuple):
            a: int
            b: int

        assert registry.for_value(Pair(1, 2)) is BuiltInContainerMaterializer


class TestMroRules:
    @pytest.fixture
    def custom(self) -> MaterializerRegistry:
        registry = MaterializerRegistry()
        registry.register(BaseMaterializer)
        registry.register(ChildMaterializer)
        return registry

    def test_most_specific_class_wins(self, custom: MaterializerRegistry) -> None:
        assert custom.for_value(Base()) is BaseMaterializer
        assert custom.for_value(Child()) is ChildMaterializer
        assert custom.for_value(GrandChild()) is ChildMaterializer

    def test_registration_order_does_not_beat_specificity(self) -> None:
        registry = MaterializerRegistry()
        registry.register(ChildMaterializer)
        registry.register(BaseMaterializer)
        assert registry.for_value(GrandChild()) is ChildMaterializer

    def test_mro_order_decides_between_unrelated_bases(self, custom: MaterializerRegistry) -> None:
        custom.register(MixinMaterializer)
        assert Diamond.__mro__.index(Mixin) < Diamond.__mro__.index(Child)
        assert custom.for_value(Diamond()) is MixinMaterializer

    def test_later_registration_for_the_same_type_wins(self, custom: MaterializerRegistry) -> None:
        class Override(_Noop):
            ASSOCIATED_TYPES = (Child,)

        custom.register(Override)
        assert custom.for_value(Child()) is Override
        assert custom.for_type(GrandChild) is Override

    def test_register_for_explicit_types(self) -> None:
        registry = MaterializerRegistry()
        registry.register(BaseMaterializer, Mixin, Outer.Inner)
        assert registry.for_value(Diamond()) is BaseMaterializer
        assert registry.for_value(Outer.Inner()) is BaseMaterializer
        with pytest.warns(UserWarning):
            assert registry.for_value(Base()) is CloudpickleMaterializer

    def test_refusal_falls_through_to_the_next_candidate(
        self, registry: MaterializerRegistry
    ) -> None:
        registry.register(PickyDictMaterializer)
        assert registry.for_value({"picky": 1}) is PickyDictMaterializer
        assert registry.for_value({"other": 1}) is BuiltInContainerMaterializer
        assert registry.for_type(dict) is PickyDictMaterializer

    def test_registering_after_a_lookup_invalidates_the_cache(
        self, custom: MaterializerRegistry
    ) -> None:
        assert custom.for_value(GrandChild()) is ChildMaterializer

        class Specific(_Noop):
            ASSOCIATED_TYPES = (GrandChild,)

        custom.register(Specific)
        assert custom.for_value(GrandChild()) is Specific

    def test_only_materializers_can_be_registered(self) -> None:
        with pytest.raises(TypeError, match="not a Materializer"):
            MaterializerRegistry().register(NotAMaterializer)  # type: ignore[arg-type]


class Gadget:
    """A type only a materializer of the user's (never registered) lists."""


class GadgetMaterializer(Materializer):
    ASSOCIATED_TYPES = (Gadget,)

    def save(self, data: Any) -> None:
        self.write_bytes("gadget", b"")

    def load(self, data_type: type[Any]) -> Any:
        return Gadget()


class TestFallbackWarning:
    def test_warns_once_per_type_per_registry(self, registry: MaterializerRegistry) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                assert registry.for_value(Base()) is CloudpickleMaterializer
                assert registry.for_value(Child()) is CloudpickleMaterializer
            default_registry().for_value(Base())
        messages = [str(w.message) for w in caught]
        assert [w.category for w in caught] == [UserWarning] * 3
        assert "Base" in messages[0] and "Child" in messages[1] and "Base" in messages[2]
        assert "has no dedicated materializer and is pickled" in messages[0]
        assert "Python and library versions" in messages[0]

    def test_says_how_a_step_uses_a_materializer(self, registry: MaterializerRegistry) -> None:
        # "Register a materializer for it": there is no registration a user can make; a step
        # uses a materializer of the user's only when its output_materializers names it
        class Unlisted:
            pass

        with pytest.warns(UserWarning) as caught:
            registry.for_value(Unlisted())
        assert "@step(output_materializers=YourMaterializer)" in str(caught[0].message)
        assert "Register a materializer" not in str(caught[0].message)

    def test_names_the_materializer_that_lists_the_type(
        self, registry: MaterializerRegistry
    ) -> None:
        # defining one with the type in ASSOCIATED_TYPES is not enough: say so, by name
        with pytest.warns(UserWarning) as caught:
            registry.for_value(Gadget())
        assert (
            "GadgetMaterializer lists it in its ASSOCIATED_TYPES, but a step uses a "
            "materializer of yours only when it names it: "
            "@step(output_materializers=GadgetMaterializer)."
        ) in str(caught[0].message)

    def test_message_for_a_declined_value(self, registry: MaterializerRegistry) -> None:
        with pytest.warns(UserWarning, match="no materializer that can save this value"):
            registry.for_value({"k": object()})

    def test_warnings_are_once_per_type_across_threads(
        self, registry: MaterializerRegistry
    ) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            threads = [
                threading.Thread(target=registry.for_value, args=(Base(),)) for _ in range(8)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert len(caught) == 1

    def test_without_fallback_unknown_types_are_an_error(self) -> None:
        registry = MaterializerRegistry(fallback=None)
        registry.register(PickyDictMaterializer)
        assert registry.fallback is None
        with pytest.raises(MaterializationError, match="No materializer is registered for type"):
            registry.for_value(Base())
        with pytest.raises(MaterializationError, match="No materializer can save this value"):
            registry.for_value({"x": 1})


class TestLazyRegistration:
    def test_lazy_materializers_keep_the_priority_of_their_registration(
        self, registry: MaterializerRegistry
    ) -> None:
        class MyArrays(_Noop):
            ASSOCIATED_TYPES = (np.ndarray,)

        registry.register(MyArrays)  # after default_registry's lazy numpy entry: wins
        assert registry.for_value(np.arange(3)) is MyArrays
        assert registry.for_value(np.int8(1)) is NumpyMaterializer

    def test_lazy_entry_registered_later_wins_over_an_earlier_direct_one(self) -> None:
        class Early(_Noop):
            ASSOCIATED_TYPES = (np.ndarray,)

        registry = MaterializerRegistry()
        registry.register(Early)
        registry.register_lazy("numpy", materializer_path(NumpyMaterializer))
        assert registry.for_value(np.arange(3)) is NumpyMaterializer

    def test_a_broken_lazy_entry_fails_every_time(self) -> None:
        registry = MaterializerRegistry()
        registry.register_lazy("numpy", "wharf.no_such_module:Nothing")
        for _ in range(2):
            with pytest.raises(MaterializationError, match="Cannot import materializer"):
                registry.for_value(np.arange(1))

    def test_unrelated_types_do_not_trigger_the_import(self) -> None:
        registry = MaterializerRegistry()
        registry.register_lazy("numpy", "wharf.no_such_module:Nothing")
        registry.register(BuiltInMaterializer)
        assert registry.for_value(1) is BuiltInMaterializer
