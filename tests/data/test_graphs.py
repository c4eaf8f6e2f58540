"""Graphs: readers on small hand-written files, the graph-tool format, the assortative generator
and the held-out link split."""

import gzip
import os
import pathlib
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
import scipy.sparse as sp

from pyro_memo.data import (
    Graph,
    assortative_graph,
    assortative_link_probability,
    from_adjacency,
    from_networkx,
    load_networkx_graph,
    read_edge_list,
    read_graph_tool,
    read_npz,
    split_pairs,
)
from pyro_memo.metrics import hungarian_accuracy, nmi

#: where graph-tool's network collection may lie (its files are never required: tests skip without them)
GT_COLLECTIONS = [os.environ.get("PYRO_MEMO_GT_COLLECTION", ""),
                  "/usr/lib/python3/dist-packages/graph_tool/collection",
                  "/tmp/gtpkg/usr/lib/python3/dist-packages/graph_tool/collection"]


def collection_file(name):
    for folder in filter(None, GT_COLLECTIONS):
        for suffix in (".gt.gz", ".gt"):
            path = pathlib.Path(folder) / f"{name}{suffix}"
            if path.is_file():
                return path
    pytest.skip(f"graph-tool's collection file {name}.gt(.gz) is not available")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


# ---------------------------------------------------------------- Graph

def test_graph_canonical_form():
    g = Graph([[3, 1], [1, 3], [0, 2], [2, 2], [1, 0]], num_nodes=5, labels=[0, 1, 1, 0, 2], name="toy")
    np.testing.assert_array_equal(g.edges, [[0, 1], [0, 2], [1, 3]])
    assert g.edges.dtype == np.int64 and not g.edges.flags.writeable
    assert (g.num_nodes, g.num_edges) == (5, 3)
    np.testing.assert_array_equal(g.degrees(), [2, 2, 1, 1, 0])
    np.testing.assert_array_equal(g.neighbors(1), [0, 3])
    np.testing.assert_array_equal(g.has_edges([[1, 0], [3, 1], [2, 3], [4, 4]]), [True, True, False, False])
    assert g.density == pytest.approx(3 / 10)
    assert "toy" in repr(g) and "3 edges" in repr(g)
    assert g.self_loops == 1 and Graph(g.edges, 5).self_loops == 0  # [2, 2] was dropped, and counted
    A = g.adjacency().toarray()
    assert (A == A.T).all() and A.sum() == 6


@pytest.mark.parametrize("node,match", [(1.5, "node must be a non-negative integer; got 1.5"),
                                        (True, "got True"), ("1", "got '1'"), (-1, "got -1"),
                                        (5, r"node 5 is not in \[0, 5\)")])
def test_neighbors_names_a_bad_node(node, match):
    """neighbors(1.5) failed in numpy with 'only integers, slices ... are valid indices', and neighbors('1') with
    Python's "'<=' not supported between instances of 'int' and 'str'"."""
    g = Graph([[1, 2]], 5)
    with pytest.raises(ValueError, match=match):
        g.neighbors(node)
    np.testing.assert_array_equal(g.neighbors(np.int64(1)), [2])


@pytest.mark.parametrize("pairs,match", [([[0, 7]], r"\[0, 5\); found \[0, 7\]"), ([[-1, 8]], r"\[0, 5\)"),
                                         ([[0.5, 2]], "integer"), ([["a", "b"]], "integer"),
                                         (np.array([[1, 2**63 + 2]], dtype=np.uint64),
                                          r"found \[1, 9223372036854775810\]"),
                                         ([0, 1, 2], r"\(M, 2\)")])
def test_has_edges_refuses_ids_outside_the_graph(pairs, match):
    """An id past the last node read another pair's key i * N + j: on 5 nodes with the one link (1, 2),
    has_edges([[0, 7]]) answered True (key 7 is (1, 2)); a fraction was truncated to another node."""
    g = Graph([[1, 2]], 5)
    with pytest.raises(ValueError, match=match):
        g.has_edges(pairs)
    np.testing.assert_array_equal(g.has_edges([1, 2]), [True])  # one pair given flat, as before


@pytest.mark.parametrize("edges,n,match", [([[0, -1]], 3, r"\[0, 3\)"), ([[0, 3]], 3, r"\[0, 3\)"),
                                           ([[0, 1.5]], 3, "integer"), ([[0, np.nan]], 3, "integer"),
                                           ([0, 1, 2], 3, r"\(M, 2\)")])
def test_graph_refuses_bad_edges(edges, n, match):
    with pytest.raises(ValueError, match=match):
        Graph(edges, n)


def test_graph_refuses_bad_labels():
    with pytest.raises(ValueError, match="shape"):
        Graph([[0, 1]], 3, labels=[0, 1])


# ---------------------------------------------------------------- text edge lists

def test_read_edge_list_whitespace_comments_duplicates_loops(tmp_path):
    path = write(tmp_path, "toy.edges", "# a comment\n% another\n\n0 1\n1\t2  7.5\n2 1\n3 3\n1 0\n4 2\n")
    g = read_edge_list(path)
    np.testing.assert_array_equal(g.edges, [[0, 1], [1, 2], [2, 4]])
    assert g.num_nodes == 5          # largest id + 1: node 3 (only a self loop) stays, isolated
    assert g.self_loops == 1


def test_read_edge_list_csv_with_header_and_sparse_ids(tmp_path):
    path = write(tmp_path, "links.csv", "source,target,weight\n0,9,1.0\n9,4,2.0\n")
    g = read_edge_list(path)
    assert g.num_nodes == 10 and g.num_edges == 2
    assert read_edge_list(path, num_nodes=12).num_nodes == 12


@pytest.mark.parametrize("text,match", [("0 1\n5\n", "line 2: expected two node ids"),
                                        ("0 1\n2 -3\n", "line 2: node id -3 is negative"),
                                        ("0 1.5\n", "line 1: node id '1.5' is not an integer"),
                                        ("0 1\n1 nan\n", "line 2: node id is NaN"),
                                        ("0 1\n1 x\n", "line 2: node id 'x'"),
                                        ("", "no links found"),
                                        ("# only a comment\nsource target\n", "no links found"),
                                        ("3 3\n2 2\n", "no links found: its 2 lines each link a node to itself")])
def test_read_edge_list_bad_input(tmp_path, text, match):
    path = write(tmp_path, "bad.txt", text)
    with pytest.raises(ValueError, match=match) as info:
        read_edge_list(path)
    assert "bad.txt" in str(info.value)


def test_read_edge_list_id_beyond_num_nodes(tmp_path):
    with pytest.raises(ValueError, match="not below num_nodes"):
        read_edge_list(write(tmp_path, "g.txt", "0 7\n"), num_nodes=5)


# ---------------------------------------------------------------- matrices, npz, networkx

def test_from_adjacency_round_trip(tmp_path):
    g, _, _ = assortative_graph(60, 3, seed=1, expected_edges=150)
    for matrix in (g.adjacency(), g.adjacency().toarray(), sp.triu(g.adjacency()).tocsr()):
        back = from_adjacency(matrix)
        np.testing.assert_array_equal(back.edges, g.edges)
        assert back.num_nodes == g.num_nodes
    sp.save_npz(tmp_path / "g.npz", g.adjacency().tocsr())
    np.testing.assert_array_equal(read_npz(tmp_path / "g.npz").edges, g.edges)
    weighted = np.array([[5.0, 2.0, 0.0], [0.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(from_adjacency(weighted).edges, [[0, 1], [1, 2]])


@pytest.mark.parametrize("matrix,match", [(np.ones((2, 3)), "square"), (np.array([[0, -1], [-1, 0]]), "negative"),
                                          (np.array([[0, np.nan], [0, 0]]), "NaN")])
def test_from_adjacency_refuses(matrix, match):
    with pytest.raises(ValueError, match=match):
        from_adjacency(matrix)


@pytest.mark.parametrize("dtype", [np.float16, object])
def test_from_adjacency_reads_float16_and_object_arrays_of_numbers(dtype):
    """scipy.sparse holds neither dtype: from_adjacency (and so HDPCommunities.fit) refused a float16 matrix or an
    object array of numbers with scipy's 'scipy.sparse does not support dtype float16', naming no argument."""
    matrix = np.array([[0, 1, 0], [0, 0, 2], [0, 0, 0]])
    np.testing.assert_array_equal(from_adjacency(matrix.astype(dtype)).edges, from_adjacency(matrix).edges)


@pytest.mark.parametrize("matrix,match", [(np.array([["0", "1"], ["1", "0"]]), "must hold numbers; got dtype <U1"),
                                          (np.array([[0, "x"], [1, 0]], dtype=object), "must hold numbers"),
                                          ([[0, 1], [1]], "rows have different lengths")])
def test_from_adjacency_names_the_matrix_for_entries_that_are_not_numbers(matrix, match):
    with pytest.raises(ValueError, match=match):
        from_adjacency(matrix)


@pytest.mark.parametrize("matrix", [np.array([[0, 1 + 1j], [1 + 1j, 0]]), sp.csr_matrix(np.array([[0, 1j], [1j, 0]]))])
def test_from_adjacency_refuses_a_complex_matrix_instead_of_dropping_its_imaginary_parts(matrix):
    with pytest.raises(ValueError, match=r"adjacency matrix is complex.*imaginary parts would be dropped"):
        from_adjacency(matrix)


def test_read_npz_names_the_file(tmp_path):
    path = write(tmp_path, "not.npz", "hello")
    with pytest.raises(ValueError, match="not.npz"):
        read_npz(path)


def test_karate_and_lesmis():
    nx = pytest.importorskip("networkx")
    g = load_networkx_graph("karate")
    assert (g.num_nodes, g.num_edges) == (34, 78)
    assert sorted(np.bincount(g.labels)) == [17, 17]
    assert g.labels[0] != g.labels[33]                        # the instructor and the president
    assert (load_networkx_graph("lesmis").num_nodes, load_networkx_graph("lesmis").num_edges) == (77, 254)
    directed = nx.DiGraph([("a", "b"), ("b", "a"), ("b", "c"), ("c", "c")])
    d = from_networkx(directed)
    np.testing.assert_array_equal(d.edges, [[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="no attribute 'club'"):
        from_networkx(directed, label_attr="club")
    with pytest.raises(ValueError, match="unknown networkx graph"):
        load_networkx_graph("football")


def test_networkx_is_optional(monkeypatch):
    """Importing the data package never imports networkx; loading a networkx graph without it says what to install."""
    code = "import sys, pyro_memo.data; assert 'networkx' not in sys.modules"
    root = str(pathlib.Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    monkeypatch.setitem(sys.modules, "networkx", None)
    with pytest.raises(ImportError, match="pip install networkx"):
        load_networkx_graph("karate")


# ---------------------------------------------------------------- graph-tool's gt format

def _gt_string(order, text):
    data = text.encode() if isinstance(text, str) else text
    return struct.pack(order + "Q", len(data)) + data


def serialise_gt(adjacency, directed, vertex_values, big_endian=False):
    """A small ``.gt`` file written from the published format description (uint8 neighbour ids)."""
    o = ">" if big_endian else "<"
    out = b"\xe2\x9b\xbe gt" + bytes([1, int(big_endian)]) + _gt_string(o, "made by a test")
    out += bytes([int(directed)]) + struct.pack(o + "Q", len(adjacency))
    for neighbours in adjacency:
        out += struct.pack(o + "Q", len(neighbours)) + bytes(neighbours)
    num_edges = sum(len(n) for n in adjacency)
    out += struct.pack(o + "Q", 5)
    out += bytes([0]) + _gt_string(o, "description") + bytes([6]) + _gt_string(o, "a toy")          # graph, string
    out += bytes([2]) + _gt_string(o, "weight") + bytes([4]) + struct.pack(o + "d" * num_edges,
                                                                            *range(num_edges))     # edge, double
    out += bytes([1]) + _gt_string(o, "pos") + bytes([11]) + b"".join(                              # vertex, vector
        struct.pack(o + "Q", 2) + struct.pack(o + "dd", v, -v) for v in range(len(adjacency)))
    out += bytes([1]) + _gt_string(o, "name") + bytes([13]) + b"".join(                             # vector<string>
        struct.pack(o + "Q", 1) + _gt_string(o, f"v{v}") for v in range(len(adjacency)))
    out += bytes([1]) + _gt_string(o, "value") + bytes([2]) + struct.pack(o + "i" * len(vertex_values),
                                                                           *vertex_values)         # int32 labels
    return out


@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("compress", [False, True])
def test_read_graph_tool_self_serialised(tmp_path, big_endian, compress):
    adjacency = [[1, 2], [2], [0], [], [3]]                   # 2 -> 0 repeats 0 -> 2; node 4 -> 3
    data = serialise_gt(adjacency, True, [7, 7, 3, 9, 3], big_endian)
    path = tmp_path / ("toy.gt.gz" if compress else "toy.gt")
    path.write_bytes(gzip.compress(data) if compress else data)
    g = read_graph_tool(path)
    np.testing.assert_array_equal(g.edges, [[0, 1], [0, 2], [1, 2], [3, 4]])
    np.testing.assert_array_equal(g.labels, [1, 1, 0, 2, 0])
    assert read_graph_tool(path, label_attr="missing").labels is None


def test_a_graph_tool_file_whose_value_property_is_a_vector_reads_without_labels(tmp_path):
    """The labels' default property 'value' as a vector<double> made read_graph_tool (and fit FILE.gt --model
    relational) refuse the whole file: 'vertex property 'value' is not scalar; cannot use it as labels', although
    no labels were asked for. By default it now reads the graph without labels; asked for by name it is refused."""
    o = "<"
    data = b"\xe2\x9b\xbe gt" + bytes([1, 0]) + _gt_string(o, "toy") + bytes([0]) + struct.pack(o + "Q", 3)
    for neighbours in ([1], [2], []):
        data += struct.pack(o + "Q", len(neighbours)) + bytes(neighbours)
    data += struct.pack(o + "Q", 1) + bytes([1]) + _gt_string(o, "value") + bytes([11]) + b"".join(
        struct.pack(o + "Q", 2) + struct.pack(o + "dd", v, v) for v in range(3))
    path = tmp_path / "vec.gt"
    path.write_bytes(data)
    g = read_graph_tool(path)
    assert g.labels is None and g.edges.tolist() == [[0, 1], [1, 2]]
    with pytest.raises(ValueError, match="'value' is not scalar"):
        read_graph_tool(path, label_attr="value")


def test_read_graph_tool_bad_files(tmp_path):
    with pytest.raises(ValueError, match="not a graph-tool gt file"):
        read_graph_tool(write(tmp_path, "x.gt", "hello world"))
    data = serialise_gt([[1], []], False, [0, 1])
    (tmp_path / "cut.gt").write_bytes(data[:-3])
    with pytest.raises(ValueError, match="cut.gt: truncated"):
        read_graph_tool(tmp_path / "cut.gt")


def test_read_graph_tool_corrupt_gzip_names_the_file(tmp_path):
    """A damaged deflate stream in a .gt.gz (zlib.error, not an OSError) was a raw zlib traceback."""
    packed = bytearray(gzip.compress(serialise_gt([[1, 2], [2], [0], [], [3]], True, [7, 7, 3, 9, 3])))
    for offset in (20, 21, 25):
        packed[offset] ^= 0xFF
    path = tmp_path / "bad.gt.gz"
    path.write_bytes(bytes(packed))
    with pytest.raises(ValueError, match="bad.gt.gz: corrupt gzip data"):
        read_graph_tool(path)


def test_read_graph_tool_football():
    g = read_graph_tool(collection_file("football"))
    assert (g.num_nodes, g.num_edges) == (115, 613)
    assert len(np.unique(g.labels)) == 12


def test_read_graph_tool_polblogs_is_symmetrised():
    g = read_graph_tool(collection_file("polblogs"))
    assert g.num_nodes == 1490 and len(np.unique(g.labels)) == 2
    assert (g.edges[:, 0] < g.edges[:, 1]).all()


# ---------------------------------------------------------------- the assortative generator

def _check_simple(g):
    e = g.edges
    assert e.dtype == np.int64 and e.ndim == 2 and e.shape[1] == 2
    assert (e[:, 0] < e[:, 1]).all() and e.min() >= 0 and e.max() < g.num_nodes
    assert len(np.unique(e[:, 0] * g.num_nodes + e[:, 1])) == len(e)


def test_assortative_graph_shapes_and_memberships():
    g, pi, labels = assortative_graph(300, 4, seed=3)
    _check_simple(g)
    assert pi.shape == (300, 4) and np.allclose(pi.sum(1), 1)
    np.testing.assert_array_equal(labels, pi.argmax(1))
    np.testing.assert_array_equal(g.labels, labels)
    assert np.median(pi.max(1)) > 0.9                    # alpha = 0.05: one dominant community
    # the metrics take labels from an argmax of memberships
    assert nmi(labels, pi.argmax(1)) == pytest.approx(1.0) and hungarian_accuracy(labels, labels) == 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_assortative_graph_link_count_within_expectation(seed):
    """Given the memberships, the link count is a sum of independent Bernoullis: within 5 sd of its mean."""
    w = np.array([0.3, 0.2, 0.1])
    g, pi, _ = assortative_graph(400, 3, alpha=0.3, link_probs=w, epsilon=0.01, seed=seed, block_size=37)
    rows, cols = np.triu_indices(400, 1)
    p = assortative_link_probability(pi, w, 0.01)[rows, cols]
    mean, sd = p.sum(), np.sqrt((p * (1 - p)).sum())
    assert abs(g.num_edges - mean) < 5 * sd
    # links are assortative: links join two nodes of one dominant community far more often than pairs do
    top = pi.argmax(1)
    same_pair = top[rows] == top[cols]
    same_link = (top[g.edges[:, 0]] == top[g.edges[:, 1]]).mean()
    expected = p[same_pair].sum() / p.sum()
    assert abs(same_link - expected) < 0.05 and expected > same_pair.mean() + 0.15


def test_assortative_graph_expected_edges_knob():
    for sparse in (False, True):
        g, _, _ = assortative_graph(2000, 10, expected_edges=20_000, epsilon=1e-4, sparse=sparse, seed=4)
        _check_simple(g)
        assert abs(g.num_edges - 20_000) < 0.03 * 20_000
    with pytest.raises(ValueError, match="background"):
        assortative_graph(2000, 10, expected_edges=10, epsilon=0.1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        assortative_graph(100, 2, expected_edges=4000, epsilon=0.0)


def test_assortative_graph_sparse_mode_at_scale():
    start = time.perf_counter()
    g, pi, _ = assortative_graph(100_000, 50, expected_edges=1_000_000, epsilon=1e-6, sparse=True, seed=5)
    elapsed = time.perf_counter() - start
    assert elapsed < 30, f"sparse generator took {elapsed:.1f} s"
    assert abs(g.num_edges - 1_000_000) < 0.02 * 1_000_000
    _check_simple(g)
    assert pi.shape == (100_000, 50)


# ---------------------------------------------------------------- held-out link prediction

def test_split_pairs():
    g, _, _ = assortative_graph(500, 5, expected_edges=3000, seed=6)
    train, pairs, labels = split_pairs(g, fraction=0.1, seed=0)
    m = int(round(0.1 * g.num_edges))
    assert pairs.shape == (2 * m, 2) and labels.shape == (2 * m,) and labels.sum() == m
    assert (pairs[:, 0] < pairs[:, 1]).all()
    assert len(np.unique(pairs[:, 0] * g.num_nodes + pairs[:, 1])) == 2 * m
    assert train.num_nodes == g.num_nodes and train.num_edges == g.num_edges - m
    np.testing.assert_array_equal(g.has_edges(pairs), labels == 1)       # non-links really are non-links
    assert not train.has_edges(pairs).any()                               # nothing held out is in train
    np.testing.assert_array_equal(train.labels, g.labels)
    again = split_pairs(g, fraction=0.1, seed=0)
    np.testing.assert_array_equal(again[1], pairs)


@pytest.mark.parametrize("seed", range(10))
def test_a_training_graph_split_again_never_labels_a_held_out_link_a_non_link(seed):
    g, _, _ = assortative_graph(60, 3, expected_edges=150, seed=seed)
    train, first, _ = split_pairs(g, fraction=0.5, seed=seed)
    valid, pairs, labels = split_pairs(train, fraction=0.5, seed=seed + 100)
    np.testing.assert_array_equal(g.has_edges(pairs), labels == 1)  # against the whole graph, not train
    held = Graph(first, g.num_nodes)
    assert not held.has_edges(pairs).any()  # the first split's pairs (unobserved in train) are not drawn
    assert len(valid.missing) == len(first) + len(pairs)


def test_non_links_are_counted_without_the_missing_pairs():
    path = Graph([[0, 1], [1, 2]], 4, missing=[[0, 2], [0, 3], [1, 3], [2, 3]])  # no observed non-link left
    with pytest.raises(ValueError, match="only 0 observed unlinked pairs"):
        split_pairs(path, fraction=0.5)


@pytest.mark.parametrize("edges,num_nodes,match", [
    ([[3_000_000_000, 3_000_000_001]], 3_100_000_000, "num_nodes must lie in"),
    ([["a", "b"]], 3, "integer node ids; got dtype <U1"),
    (np.array([[True, False]]), 3, "integer node ids; got dtype bool"),
])
def test_graphs_whose_pair_keys_overflow_or_ids_are_not_numbers_are_refused(edges, num_nodes, match):
    with pytest.raises(ValueError, match=match):
        Graph(edges, num_nodes)


def test_split_pairs_refuses():
    full = Graph(np.array(np.triu_indices(4, 1)).T, 4)
    with pytest.raises(ValueError, match="unlinked pairs"):
        split_pairs(full, fraction=0.5)
    with pytest.raises(ValueError, match="fraction"):
        split_pairs(full, fraction=1.0)


@pytest.mark.parametrize("num_nodes", ["10", 7.5, 0])
def test_read_edge_list_names_a_bad_num_nodes(tmp_path, num_nodes):
    """num_nodes='10' failed after the file was read with Python's "'>=' not supported between instances of 'int'
    and 'str'", 0 as 'node id 2 is not below num_nodes = 0'; 7.5 was refused only after the file was read."""
    path = write(tmp_path, "g.txt", "0 1\n1 2\n")
    with pytest.raises(ValueError, match="num_nodes must be a positive integer"):
        read_edge_list(path, num_nodes=num_nodes)
    assert read_edge_list(path, num_nodes=np.int64(5)).num_nodes == 5


@pytest.mark.parametrize("fraction", ["0.1", None, np.array([0.1, 0.2]), True])
def test_split_pairs_names_a_fraction_that_is_not_a_number(fraction):
    """'0.1' and None failed in the comparison with Python's "'<' not supported between instances of 'int' and
    'str'", an array with numpy's 'truth value of an array ... is ambiguous'."""
    with pytest.raises(ValueError, match=r"fraction must lie in \(0, 1\); got"):
        split_pairs(Graph(np.array(np.triu_indices(6, 1)).T[::2], 6), fraction=fraction)


@pytest.mark.parametrize("content,match", [(b"0 1\n0 99999999999999999999999\n", "line 2: node id 9+ is past the"),
                                           (b"0 1\n\xff\xfe 2\n", "not UTF-8 text")])
def test_edge_lists_with_ids_past_int64_or_binary_content_name_the_line(tmp_path, content, match):
    # an id past int64 raised OverflowError, a binary file UnicodeDecodeError
    (tmp_path / "g.txt").write_bytes(content)
    with pytest.raises(ValueError, match=match):
        read_edge_list(tmp_path / "g.txt")


@pytest.mark.parametrize("kwargs,message", [({"num_nodes": 2.5}, "num_nodes must be a positive integer"),
                                            ({"num_communities": True}, "num_communities must be a positive integer"),
                                            ({"alpha": float("nan")}, "alpha must be a positive finite number"),
                                            ({"alpha": "x"}, "alpha must be a positive finite number"),
                                            ({"expected_edges": float("nan")}, "expected_edges must be a positive"),
                                            ({"link_probs": [float("nan"), 0.5]}, r"must lie in \[0, 1\]"),
                                            ({"epsilon": None}, "epsilon in"),
                                            ({"link_range": (0.5, 0.1)}, r"link_range must be \(low, high\)"),
                                            ({"link_range": (0.1,)}, "link_range must be"),
                                            ({"link_range": (0.1, 2)}, "link_range must be")])
def test_assortative_graph_names_settings_it_truncated_or_turned_into_an_empty_graph(kwargs, message):
    # num_nodes=2.5 became 2; alpha=NaN gave random memberships and expected_edges=NaN or a NaN strength a
    # graph without links, silently; a string alpha or None epsilon a comparison TypeError
    with pytest.raises(ValueError, match=message):
        assortative_graph(**{"num_nodes": 10, "num_communities": 2, **kwargs})


def test_a_matrix_given_for_a_graph_is_a_type_error_naming_the_converter():
    # both raised AttributeError: 'numpy.ndarray' object has no attribute 'nodes' / 'num_edges'
    with pytest.raises(TypeError, match=r"from_networkx needs a networkx graph; got ndarray.*from_adjacency"):
        from_networkx(np.zeros((3, 3)))
    with pytest.raises(TypeError, match=r"split_pairs needs a pyro_memo.data.Graph; got ndarray"):
        split_pairs(np.zeros((3, 3)), 0.5)
