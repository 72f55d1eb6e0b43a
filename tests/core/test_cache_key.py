from dataclasses import replace

from wharf.core.cache_key import CacheKeyFacts, InputFact, KeyPolicy, compute_cache_key

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


def test_no_hash_falls_back_to_id():
    a = replace(BASE, inputs={"data": InputFact("id-1", None)})
    b = replace(BASE, inputs={"data": InputFact("id-2", None)})
    assert key(a) != key(b)


def test_no_concatenation_collisions():
    a = replace(BASE, parameters={"ab": "c"})
    b = replace(BASE, parameters={"a": "bc"})
    assert key(a) != key(b)
