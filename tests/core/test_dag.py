import pytest
from hypothesis import given
from hypothesis import strategies as st

from wharf.core.dag import Dag
from wharf.core.errors import PipelineDefinitionError


def test_topological_order_keeps_insertion_order_for_ties():
    dag = Dag({"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c")})
    assert dag.order == ("a", "b", "c", "d")
    assert dag.roots == ("a",)
    assert dag.downstream["a"] == ("b", "c")
    assert dag.descendants("b") == {"d"}


def test_cycle_is_named():
    with pytest.raises(PipelineDefinitionError, match=r"cycle: .*a.*b.*a|cycle: .*b.*a.*b"):
        Dag({"a": ("b",), "b": ("a",), "c": ()})


def test_self_loop():
    with pytest.raises(PipelineDefinitionError, match="cycle"):
        Dag({"a": ("a",)})


def test_unknown_upstream():
    with pytest.raises(PipelineDefinitionError, match="unknown step 'x'"):
        Dag({"a": ("x",)})


def test_from_edges():
    dag = Dag.from_edges(["a", "b"], [("a", "b"), ("a", "b")])
    assert dag.upstream == {"a": (), "b": ("a",)}


@given(st.integers(min_value=1, max_value=30), st.data())
def test_random_dags_order_respects_edges(n, data):
    nodes = [f"n{i}" for i in range(n)]
    upstream = {
        node: tuple(data.draw(st.lists(st.sampled_from(nodes[:i]), max_size=3)) if i else ())
        for i, node in enumerate(nodes)
    }
    dag = Dag(upstream)
    position = {n: i for i, n in enumerate(dag.order)}
    assert sorted(dag.order) == sorted(nodes)
    for node, ups in upstream.items():
        for up in ups:
            assert position[up] < position[node]
