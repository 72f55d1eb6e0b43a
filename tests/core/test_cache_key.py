import hashlib
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from wharf.core.cache_key import (
    CacheKeyFacts,
    InputFact,
    KeyPolicy,
    code_digest,
    compute_cache_key,
    without_comments,
)

BASE = CacheKeyFacts(
    project_id="p",
    artifact_store_id="s",
    artifact_store_path="/a",
    step_source="m:f",
    code_hash="c1",
    parameters={"x": 1, "y": [1, 2]},
    inputs={"data": InputFact("id-1", "hash-1")},
    outputs={"output": "m:Mat"},
    environment={"E": "1"},
)


def key(facts=BASE, **policy):
    return compute_cache_key(facts, KeyPolicy(**policy))


def test_stable():
    assert key() == key(replace(BASE, parameters={"y": [1, 2], "x": 1}))


def test_every_fact_changes_the_key():
    changes = {
        "project_id": "q",
        "artifact_store_id": "t",
        "artifact_store_path": "/b",
        "step_source": "m:g",
        "code_hash": "c2",
        "parameters": {"x": 2, "y": [1, 2]},
        "inputs": {"data": InputFact("id-1", "hash-2")},
        "outputs": {"output": "m:Other"},
        "caching_parameters": {"k": 1},
        "environment": {"E": "2"},
        "file_digests": [("f.txt", "d")],
        "source_dependencies": [("m:h", "code")],
        "cache_func_result": "v",
    }
    for field, value in changes.items():
        assert key(replace(BASE, **{field: value})) != key(), field


def test_policy_switches():
    other_code = replace(BASE, code_hash="c2")
    assert key(other_code, include_step_code=False) == key(include_step_code=False)
    other_params = replace(BASE, parameters={"x": 9})
    assert key(other_params, include_step_parameters=False) == key(include_step_parameters=False)
    # value-based: same content hash, different id -> same key
    same_value = replace(BASE, inputs={"data": InputFact("id-2", "hash-1")})
    assert key(same_value) == key()
    # without values, ids count
    assert key(same_value, include_artifact_values=False) != key(include_artifact_values=False)
    # neither values nor ids: only the input name counts
    assert key(same_value, include_artifact_values=False, include_artifact_ids=False) == key(
        include_artifact_values=False, include_artifact_ids=False
    )
    ignored = replace(BASE, inputs={"data": InputFact("id-9", "hash-9")})
    assert key(ignored, ignored_inputs=frozenset({"data"})) == key(
        ignored_inputs=frozenset({"data"})
    )


def test_an_expiry_is_in_the_key_only_when_set():
    assert key(expires_after=None) == key()
    assert key(expires_after=3600) != key()
    assert key(expires_after=3600) != key(expires_after=60)


def test_no_hash_falls_back_to_id():
    a = replace(BASE, inputs={"data": InputFact("id-1", None)})
    b = replace(BASE, inputs={"data": InputFact("id-2", None)})
    assert key(a) != key(b)


def test_no_concatenation_collisions():
    a = replace(BASE, parameters={"ab": "c"})
    b = replace(BASE, parameters={"a": "bc"})
    assert key(a) != key(b)


def test_dict_keys_of_other_types_are_not_their_strings():
    # JSON turns the key 1 into "1": the step, given {1: "x"}, computed something else.
    a = replace(BASE, parameters={"d": {1: "x"}})
    b = replace(BASE, parameters={"d": {"1": "x"}})
    assert key(a) != key(b)
    assert key(replace(BASE, parameters={"d": {True: "x"}})) != key(a)


def test_a_tuple_is_not_its_list():
    # JSON turns a tuple into a list: a step given (1, 2) may compute something else.
    a = replace(BASE, parameters={"xs": (1, 2)})
    b = replace(BASE, parameters={"xs": [1, 2]})
    assert key(a) != key(b)
    assert key(replace(BASE, parameters={"xs": {"k": (1,)}})) != key(
        replace(BASE, parameters={"xs": {"k": [1]}})
    )
    assert key(a) == key(replace(BASE, parameters={"xs": (1, 2)}))


def test_a_string_with_a_lone_surrogate_is_a_value_like_any_other():
    a = replace(BASE, parameters={"s": "x \udcff"})
    assert key(a) == key(replace(BASE, parameters={"s": "x \udcff"}))
    assert key(a) != key(replace(BASE, parameters={"s": "x \udcfe"}))
    assert key(a) != key(replace(BASE, parameters={"s": "x \\udcff"}))


def test_dict_keys_of_mixed_types_hash_in_any_order():
    a = replace(BASE, parameters={"d": {1: "a", "b": 2}})
    b = replace(BASE, parameters={"d": {"b": 2, 1: "a"}})
    assert key(a) == key(b)
    assert key(a) != key(replace(BASE, parameters={"d": {1: "a", "b": 3}}))


def test_plain_json_values_keep_their_keys():
    # Keys stored before (plain JSON, sorted keys) stay valid: same encoding as before.
    facts = replace(BASE, parameters={"p": {"b": [1, 2.5, None, True], "a": "s"}})
    h = hashlib.sha256()
    for name, value in (
        ("project", "p"),
        ("artifact_store", "s"),
        ("artifact_store_path", "/a"),
        ("source", "m:f"),
        ("code", "c1"),
        ("param:p", '{"a":"s","b":[1,2.5,null,true]}'),
        ("input", "data"),
        ("input_value", "hash-1"),
        ("output:output", "m:Mat"),
        ("env:E", "1"),
    ):
        for part in (name, value):
            data = part.encode()
            h.update(len(data).to_bytes(8, "big") + data)
    assert key(facts) == h.hexdigest()


def test_sets_in_caching_parameters_hash_in_any_order():
    a = replace(BASE, caching_parameters={"s": {"a", "b", "c"}, "n": {1: {"x", "y"}}})
    b = replace(BASE, caching_parameters={"s": {"c", "b", "a"}, "n": {1: {"y", "x"}}})
    assert key(a) == key(b)
    assert key(a) != key(replace(BASE, caching_parameters={"s": {"a", "b"}, "n": {1: {"x"}}}))


SET_KEY = """
from tests.core.test_cache_key import BASE, key, replace
print(key(replace(BASE, caching_parameters={"s": {"a", "b", "c", "d", "e", "f"}})))
"""


def test_a_set_hashes_alike_in_processes_of_other_string_hashing():
    # A set's iteration order follows string hashing, which changes from process to process.
    keys = set()
    for seed in ("1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", SET_KEY],
            env=env,
            cwd=Path(__file__).parents[2],
            capture_output=True,
            text=True,
            check=True,
        )
        keys.add(done.stdout.strip())
    assert len(keys) == 1


def test_an_input_of_the_same_bytes_and_another_type_is_another_value():
    # An enum member is saved as its value: Color.RED and "red" have the same bytes.
    enum_input = {"data": InputFact("id-1", "hash-1", "m:Color", "wharf:BuiltIn")}
    str_input = {"data": InputFact("id-2", "hash-1", "builtins:str", "wharf:BuiltIn")}
    assert key(replace(BASE, inputs=enum_input)) != key(replace(BASE, inputs=str_input))
    other_materializer = {"data": InputFact("id-3", "hash-1", "m:Color", "m:Mine")}
    assert key(replace(BASE, inputs=other_materializer)) != key(replace(BASE, inputs=enum_input))
    same = {"data": InputFact("id-4", "hash-1", "m:Color", "wharf:BuiltIn")}
    assert key(replace(BASE, inputs=same)) == key(replace(BASE, inputs=enum_input))


STEP_SOURCE = '''    @step(enable_cache=True)  # cached
    def train(rows: int) -> str:
        """Trains.

        # not a comment: part of the docstring
        """
        # a comment alone on its line

        text = """a
  # inside a string

b"""
        return text + \\
            str(rows)  # trailing
'''


def step_digest(source):
    """The code digest of a step whose code hash is that of its source (as ``@step`` makes it
    for a function that closes over nothing)."""
    return code_digest(source, hashlib.sha256(source.encode()).hexdigest())


def test_comments_and_blank_lines_do_not_count():
    stripped = without_comments(STEP_SOURCE)
    assert "# cached" not in stripped and "# trailing" not in stripped
    assert "# a comment alone" not in stripped
    assert "# not a comment: part of the docstring" in stripped
    assert '"""a\n  # inside a string\n\nb"""' in stripped  # a string's lines untouched
    assert "return text + \\\n" in stripped
    digest = step_digest(STEP_SOURCE)
    edited = STEP_SOURCE.replace("# trailing", "# other words").replace("# a comment", "# new")
    assert step_digest(edited.replace("\n\n        text", "\n\n\n        text")) == digest


def test_code_and_docstring_and_strings_count():
    digest = step_digest(STEP_SOURCE)
    for old, new in (
        ("str(rows)", "repr(rows)"),
        ("Trains.", "Trains well."),
        ("# inside a string", "# inside another string"),
        ("\n\nb", "\nb"),
        ("text + \\", "text * \\"),
    ):
        assert old in STEP_SOURCE
        assert step_digest(STEP_SOURCE.replace(old, new)) != digest, old


def test_source_without_comments_keeps_the_key_it_had():
    source = "def f(x):\n    return x\n"
    assert step_digest(source) == hashlib.sha256(source.encode()).hexdigest()
    assert code_digest(None, "bytecode-hash") == "bytecode-hash"
    # a code hash covering more than the source (closed-over values) counts
    assert code_digest(source, "other") != code_digest(source, "another")
    broken = "def f(:\n    '''unterminated\n"
    assert without_comments(broken) == broken


def test_trailing_white_space_counts_only_inside_a_string():
    source = 'def f():\n    x = 1   \n    return """a   \nb"""  \n'
    assert without_comments(source) == 'def f():\n    x = 1\n    return """a   \nb"""\n'
