"""The ``@step`` decorator's checks of its options, made when the step is defined, and of a
step call's reserved keywords (``id=``, ``after=``) in a pipeline."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from wharf import CachePolicy, step
from wharf.artifacts.materializers.base import Materializer
from wharf.artifacts.materializers.builtin import BuiltInMaterializer
from wharf.core.errors import StepInterfaceError


class NotAMaterializer:
    pass


class TextMaterializer(Materializer):
    """Saves strings (and only says so): anything else would come back as its ``str()``."""

    ASSOCIATED_TYPES = (str,)

    def save(self, data: Any) -> None:
        self.write_bytes("text", str(data).encode())

    def load(self, data_type: type[Any]) -> Any:
        return self.read_bytes("text").decode()


class AnyTypeMaterializer(TextMaterializer):
    ASSOCIATED_TYPES = (object,)


class UndeclaredMaterializer(TextMaterializer):
    ASSOCIATED_TYPES = ()


def make() -> int:
    return 1


@pytest.mark.parametrize(
    "materializers",
    [NotAMaterializer, 5, {"output": NotAMaterializer}, {"output": None}],
    ids=["plain-class", "int", "mapped-plain-class", "mapped-none"],
)
def test_an_output_materializer_that_is_no_materializer_is_refused_at_definition(
    materializers: Any,
) -> None:
    with pytest.raises(StepInterfaceError, match="must be Materializer subclasses") as info:
        step(output_materializers=materializers)(make)
    assert "step 'make'" in str(info.value)


def test_a_materializer_named_for_an_output_of_a_type_it_does_not_save_is_refused() -> None:
    """The registry offers a materializer only values of its ASSOCIATED_TYPES; one a step names
    skips the registry, so a ``-> list`` output would be saved as text and reach the next step
    as a ``str``: refused when the step is defined, in one line."""

    def listed() -> list[int]:
        return [1, 2]

    def pair() -> tuple[Annotated[str, "name"], Annotated[list[int], "values"]]:
        return "a", [1]

    with pytest.raises(StepInterfaceError) as info:
        step(output_materializers=TextMaterializer)(listed)
    assert str(info.value) == (
        "Output 'output' of step 'listed' is annotated list[int], which TextMaterializer does "
        "not save (its ASSOCIATED_TYPES: str); annotate it with one of those, name a "
        "materializer for that type, or list the type in TextMaterializer.ASSOCIATED_TYPES "
        "((object,) for any type)."
    )
    with pytest.raises(StepInterfaceError, match="'values' of step 'pair' is annotated list"):
        step(output_materializers={"values": TextMaterializer})(pair)
    with pytest.raises(StepInterfaceError, match="UndeclaredMaterializer lists no type"):
        step(output_materializers=UndeclaredMaterializer)(listed)
    # What it saves, a type it declares it saves any of, or one known only once it is returned.
    assert step(output_materializers={"name": TextMaterializer})(pair).output_materializers
    assert step(output_materializers=AnyTypeMaterializer)(listed).output_materializers

    def unannotated():  # type: ignore[no-untyped-def]
        return [1]

    def maybe_text() -> str | None:
        return None

    for func in (unannotated, maybe_text):
        assert step(output_materializers=TextMaterializer)(func).output_materializers


def test_output_materializers_are_recorded_as_import_paths() -> None:
    by_class = step(output_materializers=BuiltInMaterializer)(make)
    by_path = step(output_materializers={"output": "pkg.module:Saver"})(make)
    assert by_class.output_materializers == {
        "output": "wharf.artifacts.materializers.builtin:BuiltInMaterializer"
    }
    assert by_path.output_materializers == {"output": "pkg.module:Saver"}


def consume(data: int, seed: int = 0) -> int:
    return data + seed


def test_a_step_cache_policy_that_ignores_an_unknown_input_is_refused() -> None:
    with pytest.raises(StepInterfaceError, match=r"ignores unknown inputs \['dta'\]") as info:
        step(cache_policy=CachePolicy(ignored_inputs=("dta",)))(consume)
    assert "inputs are ['data', 'seed']" in str(info.value)
    ignoring = step(cache_policy=CachePolicy(ignored_inputs=("seed",)))(consume)
    assert ignoring.cache_policy is not None
    assert ignoring.cache_policy.ignored_inputs == ("seed",)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("a::b", "must not contain '::'"),
        ("x" * 256, "1 to 255 characters"),
        ("tab\there", "control or invisible"),
    ],
)
def test_a_step_name_that_would_make_artifact_names_ambiguous_is_refused(
    name: str, message: str
) -> None:
    with pytest.raises(StepInterfaceError, match=message):
        step(name=name)(make)


@step(enable_cache=False)
def fetch(id: int, after: str = "") -> int:
    return id


@pytest.mark.parametrize(
    ("reserved", "positional"), [("id", ()), ("after", (7,))], ids=["id", "after"]
)
def test_a_parameter_named_like_a_reserved_call_argument_is_refused_in_a_pipeline_by_keyword(
    reserved: str, positional: tuple[int, ...]
) -> None:
    from wharf import pipeline

    @pipeline
    def p() -> None:
        fetch(*positional, **{reserved: "x"})

    message = (
        f"Step 'fetch' has a parameter named '{reserved}', which a step call in a pipeline "
        f"takes as its own '{reserved}='"
    )
    with pytest.raises(StepInterfaceError, match=message):
        p.compile()


def test_a_parameter_named_id_is_passed_positionally_and_outside_a_pipeline_by_keyword() -> None:
    from wharf import pipeline

    @pipeline
    def p() -> None:
        fetch(7, "", id="first")  # bound positionally: id= names the invocation

    spec = p.compile()
    assert spec.steps["first"].parameters == {"id": 7, "after": ""}
    assert fetch(id=7) == 7  # outside a pipeline the step is just the function


def test_a_parameter_named_id_given_by_keyword_in_a_dynamic_pipeline_is_refused(
    tmp_path: Any,
) -> None:
    from wharf import RunFailedError, pipeline
    from wharf.config.global_config import load_config
    from wharf.sdk.workspace import Workspace

    @pipeline(dynamic=True)
    def p() -> None:
        fetch(id=7)

    workspace = Workspace.open(load_config({}, home=tmp_path / "home"))
    try:
        with pytest.raises(RunFailedError) as failed:
            p.run_in(workspace)
    finally:
        workspace.close()
    cause = failed.value.__cause__
    assert isinstance(cause, StepInterfaceError)
    assert "Step 'fetch' has a parameter named 'id'" in str(cause)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retry": {"max_retries": -1}}, "Invalid retry settings of step 'make': max_retries"),
        ({"retry": {"max_retrys": 2}}, "Invalid retry settings of step 'make': max_retrys"),
        (
            {"environment": {"SEED": 1}},
            "environment of step 'make' maps names to strings; 'SEED' is 1",
        ),
        ({"enable_cache": "no"}, "enable_cache of step 'make' must be True, False or None"),
    ],
    ids=["negative-retries", "misspelt-retry-option", "int-variable", "str-enable-cache"],
)
def test_bad_step_options_are_refused_at_definition_in_one_line(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(StepInterfaceError, match=message):
        step(**options)(make)


@step(enable_cache=False)
def train(epochs: int, learning_rate: float = 0.1) -> int:
    return epochs


MISSPELT = (
    "Step 'train' got an unexpected argument 'epoch'; did you mean 'epochs'? "
    "Its parameters: epochs, learning_rate."
)


def test_a_misspelt_keyword_in_a_static_pipeline_names_the_step_and_its_parameters() -> None:
    from wharf import pipeline

    @pipeline
    def p() -> None:
        train(epoch=3)  # type: ignore[call-arg]

    with pytest.raises(StepInterfaceError) as refused:
        p.compile()
    assert str(refused.value) == MISSPELT


@pytest.mark.parametrize("call", ["call", "submit", "map"])
def test_a_misspelt_keyword_in_a_dynamic_pipeline_names_the_step_and_its_parameters(
    tmp_path: Any, call: str
) -> None:
    from wharf import RunFailedError, pipeline
    from wharf.config.global_config import load_config
    from wharf.sdk.workspace import Workspace

    @pipeline(dynamic=True, enable_cache=False)
    def p() -> None:
        if call == "call":
            train(epoch=3)  # type: ignore[call-arg]
        elif call == "submit":
            train.submit(epoch=3).result()
        else:
            train.map(epoch=[3, 4]).wait()

    workspace = Workspace.open(load_config({}, home=tmp_path / "home"))
    try:
        with pytest.raises(RunFailedError) as failed:
            p.run_in(workspace)
    finally:
        workspace.close()
    cause = failed.value.__cause__
    assert isinstance(cause, StepInterfaceError)
    assert str(cause) == MISSPELT


@pytest.mark.parametrize(("dynamic", "given_id"), [(True, None), (False, None), (True, "tune")])
def test_a_misspelt_keyword_in_a_later_call_names_the_step_then_the_calls_id(
    tmp_path: Any, dynamic: bool, given_id: str | None
) -> None:
    """Before, a dynamic pipeline's second call said "Step 'train_2' got ...": no step has
    that name."""
    from wharf import RunFailedError, pipeline
    from wharf.config.global_config import load_config
    from wharf.sdk.workspace import Workspace

    @pipeline(dynamic=dynamic, enable_cache=False)
    def p() -> None:
        train(1)
        train(epoch=3, **({} if given_id is None else {"id": given_id}))  # type: ignore[call-arg]

    expected = MISSPELT.replace("'train'", f"'train' (id '{given_id or 'train_2'}')", 1)
    if not dynamic:
        with pytest.raises(StepInterfaceError) as refused:
            p.compile()
        assert str(refused.value) == expected
        return
    workspace = Workspace.open(load_config({}, home=tmp_path / "home"))
    try:
        with pytest.raises(RunFailedError) as failed:
            p.run_in(workspace)
    finally:
        workspace.close()
    assert str(failed.value.__cause__) == expected


def test_a_misspelt_pipeline_parameter_names_the_pipeline_and_its_parameters() -> None:
    from wharf import pipeline

    @pipeline
    def tune(epochs: int = 1, learning_rate: float = 0.1) -> None:
        train(epochs)

    with pytest.raises(StepInterfaceError) as refused:
        tune.compile(epoch=3)  # type: ignore[call-arg]
    assert str(refused.value) == (
        "Pipeline 'tune' got an unexpected argument 'epoch'; did you mean 'epochs'? "
        "Its parameters: epochs, learning_rate."
    )
    with pytest.raises(StepInterfaceError, match=r"Pipeline 'tune': too many positional arguments"):
        tune.compile(1, 2, 3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("value", "holds"),
    [
        (object(), "a object"),
        ({1, 2}, "a set"),  # the record keeps a list, in the order of this process's hashing
        (b"v3", "a bytes"),  # kept as the str 'v3'
        (float("nan"), "the float nan"),  # kept as null
        ({1: "a"}, "a dict with the int key 1"),  # kept as {"1": "a"}
        ([{"deep": {2.5, 3}}], "a set"),
    ],
    ids=["object", "set", "bytes", "nan", "int-key", "nested"],
)
def test_caching_parameters_that_are_not_json_are_refused_in_one_line(
    value: Any, holds: str
) -> None:
    """Such a value was stored with the run as another value (or failed pydantic's serializer
    with a traceback when the pipeline ran): refused when the step is defined, naming it."""
    with pytest.raises(StepInterfaceError) as info:
        step(caching_parameters={"model": value})(make)
    message = str(info.value)
    assert message.startswith(f"caching_parameters['model'] of step 'make' holds {holds}, ")
    assert "\n" not in message and "sorted list for a set" in message


def test_json_caching_parameters_are_accepted() -> None:
    given = {"model": "v3", "n": [1, (2, 3.5)], "d": {"k": None, "b": True}}
    assert step(caching_parameters=given)(make).caching_parameters == given
    with pytest.raises(StepInterfaceError, match=r"caching_parameters\[1\] of step 'make' holds"):
        step(caching_parameters={1: "v3"})(make)


@pytest.mark.parametrize(("given", "meant"), [("aftr", "after"), ("idd", "id")])
def test_a_misspelt_call_keyword_suggests_the_one_meant(given: str, meant: str) -> None:
    from wharf import pipeline

    @step
    def count(value: int) -> int:
        return value

    @pipeline
    def p() -> None:
        count(1, **{given: "x"})

    with pytest.raises(StepInterfaceError) as info:
        p.compile()
    assert str(info.value).startswith(
        f"Step 'count' got an unexpected argument '{given}'; did you mean '{meant}='"
    )
