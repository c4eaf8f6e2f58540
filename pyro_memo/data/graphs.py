"""Undirected simple graphs for relational models: a :class:`Graph` held as its sorted edge list,
readers (edge lists, adjacency matrices, networkx, graph-tool's ``.gt`` files), a synthetic
assortative mixed-membership generator and a held-out link prediction split.

Every reader returns a simple undirected graph: a link ``(i, j)`` is stored once as ``i < j``;
directed input is symmetrised, repeated links are merged and self loops are dropped (counted in
:attr:`Graph.self_loops`, which the command line reports).
"""

import gzip
import math
import numbers
import os
import re
import struct
import zlib

import numpy as np

from ..checks import as_count, as_optional_positive_int, as_positive_float, as_positive_int, as_rng
from .files import DAMAGED_FILE_ERRORS, text_lines

#: the most nodes a :class:`Graph` holds: every key ``i * N + j`` of a pair fits in an int64
MAX_NODES = 3_037_000_499


def _edge_keys(edges, num_nodes):
    """``i * N + j`` for each row ``(i, j)``: one int64 per unordered pair, ordered as the pairs."""
    return edges[:, 0] * np.int64(num_nodes) + edges[:, 1]


def _canonical_edges(pairs, num_nodes):
    """Sorted unique ``(E, 2)`` int64 rows ``i < j`` from any ``(M, 2)`` pairs (self loops dropped)."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    lo, hi = np.minimum(pairs[:, 0], pairs[:, 1]), np.maximum(pairs[:, 0], pairs[:, 1])
    keep = lo != hi
    keys = np.unique(lo[keep] * np.int64(num_nodes) + hi[keep])
    return np.stack([keys // num_nodes, keys % num_nodes], axis=1).astype(np.int64)


def _node_pairs(pairs, num_nodes, name, flat=False):
    """``pairs`` as an ``(M, 2)`` int64 array of node ids, each a whole number in ``[0, num_nodes)``
    (``flat``: any array of ``2 M`` ids is read as ``M`` pairs).

    :raises ValueError: naming ``name`` on another shape, non-numeric ids, NaN, inf or fractions, or an
        id outside ``[0, num_nodes)`` (checked in the ids' own dtype: a uint64 at or above 2**63 or a
        float would wrap around or be truncated to another node in int64).
    """
    raw = np.asarray(pairs)
    if raw.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if flat and raw.size % 2 == 0:
        raw = raw.reshape(-1, 2)
    if raw.ndim != 2 or raw.shape[1] != 2:
        raise ValueError(f"{name} must be an (M, 2) array of node pairs; got shape {raw.shape}")
    if not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
        raise ValueError(f"{name} must hold integer node ids; got dtype {raw.dtype}")
    if not np.issubdtype(raw.dtype, np.integer):
        if not (np.all(np.isfinite(raw)) and np.all(np.mod(raw, 1) == 0)):
            raise ValueError(f"{name} must hold integer node ids (found NaN, inf or fractions)")
    if raw.min() < 0 or raw.max() >= num_nodes:
        low, high = (v.item() if np.issubdtype(raw.dtype, np.integer) else f"{v:g}" for v in (raw.min(), raw.max()))
        raise ValueError(f"node ids must lie in [0, {num_nodes}); found [{low}, {high}]")
    return raw.astype(np.int64)


class Graph:
    """An undirected simple graph on nodes ``0 .. num_nodes - 1``.

    :param edges: ``(M, 2)`` integer node pairs in any order and orientation; repeated pairs are
        merged and self loops dropped (no error; :attr:`self_loops` counts them), so ``edges`` below is
        the canonical form.
    :param int num_nodes: ``N``; every id must lie in ``[0, N)`` (isolated nodes are allowed).
    :param labels: optional ``(N,)`` integer class of each node (e.g. a known community), or ``None``.
    :param str name: optional name for messages and reports.
    :param missing: optional ``(M, 2)`` node pairs whose link status is unobserved (held out, or
        unknown): a model leaves them out of its likelihood; canonicalised like ``edges`` and
        disjoint from them.
    :raises ValueError: on a negative or out-of-range id, non-integer ids, labels of the wrong shape,
        or a missing pair that is also a link.
    """

    def __init__(self, edges, num_nodes, labels=None, name=None, missing=None):
        num_nodes = as_positive_int(num_nodes, "num_nodes")
        if not 1 <= num_nodes <= MAX_NODES:
            raise ValueError(f"num_nodes must lie in [1, {MAX_NODES:,}] (a pair's key i * N + j is one int64); "
                             f"got {num_nodes:,}")
        raw = _node_pairs(edges, num_nodes, "edges")
        self._num_nodes = num_nodes
        #: the rows of ``edges`` that linked a node to itself, dropped: the models have no self links
        self.self_loops = int((raw[:, 0] == raw[:, 1]).sum())
        self._edges = _canonical_edges(raw, num_nodes)
        self._edges.setflags(write=False)
        self._keys = _edge_keys(self._edges, num_nodes)
        self._missing = np.zeros((0, 2), dtype=np.int64)
        if missing is not None and np.asarray(missing).size:
            gaps = Graph(missing, num_nodes)  # the same checks and canonical form
            if gaps.num_edges and bool(self.has_edges(gaps.edges).any()):
                raise ValueError("a missing (unobserved) pair cannot also be a link")
            self._missing = gaps.edges
        self._csr = None
        if labels is not None:
            labels = np.asarray(labels)
            if labels.shape != (num_nodes,):
                raise ValueError(f"labels must have shape ({num_nodes},); got {labels.shape}")
            if not np.issubdtype(labels.dtype, np.integer):
                raise ValueError("labels must be integers (map class names to ints first)")
            labels = labels.astype(np.int64)
        self.labels = labels
        self.name = name

    @property
    def num_nodes(self):
        return self._num_nodes

    @property
    def num_edges(self):
        return len(self._edges)

    @property
    def edges(self):
        """``(E, 2)`` int64 read-only array of the links ``i < j``, sorted by ``(i, j)``."""
        return self._edges

    @property
    def missing(self):
        """``(M, 2)`` int64 read-only array of the unobserved pairs ``i < j`` (empty by default)."""
        return self._missing

    @property
    def density(self):
        """Fraction of the ``N (N - 1) / 2`` node pairs that are linked."""
        pairs = self._num_nodes * (self._num_nodes - 1) / 2
        return self.num_edges / pairs if pairs else 0.0

    def __len__(self):
        return self._num_nodes

    def __repr__(self):
        name = f"{self.name!r}, " if self.name else ""
        labels = "" if self.labels is None else f", {len(np.unique(self.labels))} label classes"
        return f"Graph({name}{self.num_nodes} nodes, {self.num_edges} edges{labels})"

    def adjacency(self):
        """Symmetric ``(N, N)`` scipy CSR 0/1 matrix (float64)."""
        import scipy.sparse as sp

        if self._csr is None:
            i, j = self._edges[:, 0], self._edges[:, 1]
            data = np.ones(2 * self.num_edges)
            self._csr = sp.csr_matrix((data, (np.concatenate([i, j]), np.concatenate([j, i]))),
                                      shape=(self._num_nodes, self._num_nodes))
        return self._csr

    def degrees(self):
        """``(N,)`` int64 number of neighbours of each node."""
        return np.bincount(self._edges.ravel(), minlength=self._num_nodes).astype(np.int64)

    def neighbors(self, node):
        """Sorted int64 ids of the neighbours of ``node``.

        :raises ValueError: unless ``node`` is a whole number in ``[0, num_nodes)`` (``1.5`` was numpy's
            IndexError, ``True`` node 1).
        """
        node = as_count(node, "node")
        if node >= self._num_nodes:
            raise ValueError(f"node {node} is not in [0, {self._num_nodes})")
        csr = self.adjacency()
        return np.sort(csr.indices[csr.indptr[node]:csr.indptr[node + 1]]).astype(np.int64)

    def has_edges(self, pairs):
        """Boolean ``(M,)``: whether each row ``(i, j)`` of ``pairs`` (either orientation) is a link.

        :raises ValueError: on ids that are not whole numbers in ``[0, num_nodes)`` (an id past the last
            node would read another pair's key ``i * N + j``: ``(0, N + 2)`` is ``(1, 2)``).
        """
        pairs = _node_pairs(pairs, self._num_nodes, "pairs", flat=True)
        lo, hi = np.minimum(pairs[:, 0], pairs[:, 1]), np.maximum(pairs[:, 0], pairs[:, 1])
        keys = lo * np.int64(self._num_nodes) + hi
        pos = np.searchsorted(self._keys, keys)
        found = pos < len(self._keys)
        found[found] = self._keys[pos[found]] == keys[found]
        return found & (lo != hi)


# ---------------------------------------------------------------- text edge lists

_SEPARATORS = re.compile(r"[,;\s]+")


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _parse_id(text, path, lineno):
    """One node id from a field, or a ``ValueError`` naming the file, the line and the problem."""
    try:
        value = int(text)
    except ValueError:
        if _is_number(text):
            number = float(text)
            if math.isnan(number):
                raise ValueError(f"{path}, line {lineno}: node id is NaN") from None
            if number.is_integer():
                value = int(number)
            else:
                raise ValueError(f"{path}, line {lineno}: node id {text!r} is not an integer") from None
        else:
            raise ValueError(f"{path}, line {lineno}: node id {text!r} is not an integer") from None
    if value < 0:
        raise ValueError(f"{path}, line {lineno}: node id {value} is negative")
    if value >= MAX_NODES:
        raise ValueError(f"{path}, line {lineno}: node id {value} is past the {MAX_NODES:,} nodes a graph holds")
    return value


def read_edge_list(path, num_nodes=None, name=None):
    """Read a text edge list: two integer node ids per line, separated by whitespace, commas or
    semicolons (``.txt``, ``.edges``, ``.csv``, any extension). Lines starting with ``#`` or ``%``
    and blank lines are skipped; further columns (weights, timestamps) are ignored; the first
    non-comment line may be a non-numeric header (as in a CSV file with column names).

    Ids are kept as given (no remapping): the graph has ``num_nodes`` nodes, by default the largest
    id + 1, so ids that are sparse leave isolated nodes. Self loops are dropped and duplicate or
    reversed lines merged, silently.

    :raises ValueError: naming the file and line of a line with a single field, a negative,
        non-integer or NaN id, an id ``>= num_nodes``; or naming the file when it holds no links.
    """
    num_nodes = as_optional_positive_int(num_nodes, "num_nodes")  # before the file is read; '10' was a TypeError
    rows, seen_data = [], False
    for lineno, line in text_lines(path):
        text = line.strip()
        if not text or text[0] in "#%":
            continue
        fields = [f for f in _SEPARATORS.split(text) if f]
        if not seen_data and not any(_is_number(f) for f in fields[:2]):
            seen_data = True   # a header: column names
            continue
        seen_data = True
        if len(fields) < 2:
            raise ValueError(f"{path}, line {lineno}: expected two node ids, found one field {text!r}")
        rows.append((_parse_id(fields[0], path, lineno), _parse_id(fields[1], path, lineno)))
    if not rows:
        raise ValueError(f"{path}: no links found (empty file, or only comments and a header)")
    edges = np.array(rows, dtype=np.int64)
    largest = int(edges.max())
    if num_nodes is None:
        num_nodes = largest + 1
    elif largest >= num_nodes:
        raise ValueError(f"{path}: node id {largest} is not below num_nodes = {num_nodes}")
    graph = Graph(edges, num_nodes, name=name)
    if graph.num_edges == 0:
        raise ValueError(f"{path}: no links found: its {graph.self_loops} lines each link a node to itself, and the "
                         f"models have no self links")
    return graph


# ---------------------------------------------------------------- matrices and networkx

def _dense_adjacency(matrix):
    """``matrix`` (an array, nested lists, a tensor) as a 2-D numpy array of a dtype scipy.sparse holds: float16
    as float32, an object array of numbers as float64.

    :raises ValueError: naming the adjacency matrix for another shape, ragged rows or entries that are not
        numbers (scipy's "does not support dtype" or numpy's "inhomogeneous shape" named neither).
    """
    try:
        dense = np.asarray(matrix)
    except ValueError:
        raise ValueError("an adjacency matrix must be a square 2-D (N, N) array; its rows have different "
                         "lengths") from None
    if dense.ndim != 2:
        raise ValueError(f"an adjacency matrix must be a square 2-D (N, N) array; got shape {dense.shape}")
    if dense.dtype == np.float16:
        return dense.astype(np.float32)
    if dense.dtype == object:
        try:
            return dense.astype(np.float64)
        except (TypeError, ValueError):
            pass
    if not (np.issubdtype(dense.dtype, np.number) or dense.dtype == bool):
        raise ValueError(f"an adjacency matrix must hold numbers; got dtype {dense.dtype}")
    return dense


def from_adjacency(matrix, labels=None, name=None):
    """A graph from an ``(N, N)`` adjacency matrix, dense or scipy sparse: every nonzero entry
    ``(i, j)`` (or ``(j, i)``) is a link between ``i`` and ``j``, so a directed (non-symmetric)
    matrix is symmetrised and weights are ignored; the diagonal (self loops) is dropped.

    Any real dtype is read, float16 and an object array of numbers too (scipy.sparse holds neither).

    :raises ValueError: on a non-square matrix, a complex one (its imaginary parts would be dropped), NaN or
        inf, negative entries, or entries that are not numbers (strings, rows of different lengths).
    """
    import scipy.sparse as sp

    m = sp.coo_matrix(matrix if sp.issparse(matrix) else _dense_adjacency(matrix))
    if np.iscomplexobj(m.data):
        raise ValueError(f"the adjacency matrix is complex ({m.dtype}); links are read from real entries and the "
                         f"imaginary parts would be dropped: pass its real part or abs() if that is meant")
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"an adjacency matrix must be square; got shape {m.shape}")
    if m.shape[0] < 1:
        raise ValueError("the adjacency matrix is empty")
    if not np.all(np.isfinite(m.data)):
        raise ValueError("the adjacency matrix contains NaN or inf")
    if np.any(m.data < 0):
        raise ValueError("the adjacency matrix has negative entries")
    nonzero = m.data != 0
    return Graph(np.stack([m.row[nonzero], m.col[nonzero]], axis=1), m.shape[0], labels=labels, name=name)


def read_npz(path, labels=None, name=None):
    """A graph from a scipy sparse matrix saved by ``scipy.sparse.save_npz`` (see :func:`from_adjacency`)."""
    import scipy.sparse as sp

    try:
        matrix = sp.load_npz(path)
    except (OSError, ValueError, KeyError, *DAMAGED_FILE_ERRORS) as err:
        raise ValueError(f"{path}: not a scipy sparse .npz file, or a damaged or truncated one ({type(err).__name__}: "
                         f"{str(err)[:160]})") from None
    try:
        return from_adjacency(matrix, labels=labels, name=name)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def _class_ids(values, what):
    """Integer codes ``0 .. C-1`` of ``values`` (their distinct values in sorted order)."""
    try:
        _, codes = np.unique(np.asarray(values), return_inverse=True)
    except TypeError:
        raise ValueError(f"{what}: values of mixed types cannot be ordered into classes") from None
    return codes.astype(np.int64).reshape(-1)


def from_networkx(graph, label_attr=None, name=None):
    """A :class:`Graph` from a networkx graph: nodes are numbered ``0 .. N-1`` in ``graph.nodes``
    order; directed graphs are symmetrised, multi-edges merged, self loops dropped.

    :param str label_attr: a node attribute to use as labels (e.g. ``"club"`` for Zachary's karate
        club); its distinct values are numbered in sorted order.
    :raises ValueError: when a node lacks ``label_attr``, or the graph has no nodes.
    """
    if not (hasattr(graph, "nodes") and hasattr(graph, "edges")):
        raise TypeError(f"from_networkx needs a networkx graph; got {type(graph).__name__} (an adjacency matrix "
                        "becomes a Graph by from_adjacency(matrix))")
    nodes = list(graph.nodes)
    if not nodes:
        raise ValueError("the networkx graph has no nodes")
    index = {node: i for i, node in enumerate(nodes)}
    edges = np.array([(index[u], index[v]) for u, v in graph.edges()], dtype=np.int64).reshape(-1, 2)
    labels = None
    if label_attr is not None:
        missing = [node for node in nodes if label_attr not in graph.nodes[node]]
        if missing:
            raise ValueError(f"{len(missing)} nodes have no attribute {label_attr!r} (first: {missing[0]!r})")
        labels = _class_ids([graph.nodes[node][label_attr] for node in nodes], f"node attribute {label_attr!r}")
    return Graph(edges, len(nodes), labels=labels, name=name)


#: networkx's bundled social networks: name -> (generator function, label attribute or None)
NETWORKX_GRAPHS = {"karate": ("karate_club_graph", "club"), "lesmis": ("les_miserables_graph", None)}


def load_networkx_graph(name):
    """One of networkx's bundled networks (no download): ``"karate"`` (Zachary 1977: 34 members,
    78 ties, labels the two factions after the split, node attribute ``club``) or ``"lesmis"``
    (Knuth 1993: 77 characters of Les Misérables, 254 co-appearances, no labels).

    :raises ImportError: when networkx is not installed (it is optional: ``pip install networkx``).
    :raises ValueError: for another name.
    """
    if name not in NETWORKX_GRAPHS:
        raise ValueError(f"unknown networkx graph {name!r}; choose from {sorted(NETWORKX_GRAPHS)}")
    try:
        import networkx
    except ImportError:
        raise ImportError(f"load_networkx_graph({name!r}) needs networkx, an optional dependency: "
                          "pip install networkx") from None
    function, label_attr = NETWORKX_GRAPHS[name]
    return from_networkx(getattr(networkx, function)(), label_attr=label_attr, name=name)


# ---------------------------------------------------------------- graph-tool's binary format

_GT_MAGIC = b"\xe2\x9b\xbe gt"
#: value types of the gt format, by index: (struct code or None, size in bytes); None marks strings
_GT_SCALARS = {0: ("B", 1), 1: ("h", 2), 2: ("i", 4), 3: ("q", 8), 4: ("d", 8), 5: (None, 16)}
_GT_VECTOR_OFFSET = 7     # types 7 .. 12 are vectors of types 0 .. 5
_GT_STRING, _GT_STRING_VECTOR, _GT_PYTHON_OBJECT = 6, 13, 14


class _Reader:
    """Sequential reads from a byte buffer in one byte order; errors name the file."""

    def __init__(self, data, path):
        self.data, self.path, self.pos, self.order = data, path, 0, "<"

    def take(self, size):
        if self.pos + size > len(self.data):
            raise ValueError(f"{self.path}: truncated gt file (needs {size} bytes at offset {self.pos})")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def scalar(self, code):
        size = struct.calcsize(code)
        return struct.unpack(self.order + code, self.take(size))[0]

    def array(self, code, count):
        dtype = np.dtype(code).newbyteorder(self.order)
        return np.frombuffer(self.take(count * dtype.itemsize), dtype=dtype).astype(np.int64 if code != "d"
                                                                                     else np.float64)

    def string(self):
        return self.take(self.scalar("Q"))


def _gt_values(reader, value_type, count):
    """``count`` values of gt type ``value_type``: a numpy array for scalars, else a list."""
    if value_type in _GT_SCALARS:
        code, size = _GT_SCALARS[value_type]
        if code is None:                      # long double: kept as raw bytes, rarely used
            return [reader.take(size) for _ in range(count)]
        return reader.array(code, count)
    if value_type in (_GT_STRING, _GT_PYTHON_OBJECT):
        return [reader.string() for _ in range(count)]
    if _GT_VECTOR_OFFSET <= value_type < _GT_VECTOR_OFFSET + len(_GT_SCALARS):
        inner = value_type - _GT_VECTOR_OFFSET
        return [_gt_values(reader, inner, reader.scalar("Q")) for _ in range(count)]
    if value_type == _GT_STRING_VECTOR:
        return [[reader.string() for _ in range(reader.scalar("Q"))] for _ in range(count)]
    raise ValueError(f"{reader.path}: unknown gt property value type {value_type}")


def read_graph_tool(path, label_attr=None, name=None):
    """Read graph-tool's binary ``.gt`` file (gzip-compressed ``.gt.gz`` too), as the network
    collection of graph-tool ships them (football, polbooks, polblogs, netscience, ...).

    Parsed from the published specification ("The gt file format", graph-tool documentation):
    the magic ``⛾ gt``, a version byte (1) and an endianness byte; a comment string (strings are a
    uint64 length and bytes); a directedness byte and the vertex count ``N`` (uint64); the
    adjacency, each vertex's out-degree (uint64) then its out-neighbours, stored in the narrowest
    unsigned integer holding ``N`` (8 bits when ``N < 2**8``, else 16, 32 or 64); then the property maps: their count
    (uint64) and for each a key type byte (0 graph, 1 vertex, 2 edge), a name string, a value type
    byte and the values (one, ``N`` or one per edge in adjacency order). A directed graph is
    symmetrised; loops and parallel edges are dropped / merged.

    :param str label_attr: the vertex property to return as ``labels`` (its distinct values
        numbered in sorted order); no labels when there is no such property. Default (``None``):
        ``"value"`` where that is a scalar property (football's is the conference, polblogs' the
        political leaning), else no labels; a non-scalar property named here is an error.
    :raises ValueError: naming the file when it is not a gt file or is truncated.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:  # zlib.error: a damaged deflate stream
            raise ValueError(f"{path}: corrupt gzip data ({err})") from None
    reader = _Reader(data, path)
    if reader.take(6) != _GT_MAGIC:
        raise ValueError(f"{path}: not a graph-tool gt file (no '⛾ gt' magic string)")
    version, big_endian = reader.take(1)[0], reader.take(1)[0]
    if version != 1:
        raise ValueError(f"{path}: gt format version {version} is not supported (only 1)")
    reader.order = ">" if big_endian else "<"
    reader.string()                                                  # comment
    reader.take(1)                                                   # directed: symmetrised anyway
    num_nodes = reader.scalar("Q")
    if num_nodes < 1:
        raise ValueError(f"{path}: the graph has no vertices")
    width = next(code for code, bits in (("B", 8), ("H", 16), ("I", 32), ("Q", 64)) if num_nodes < 2 ** bits)
    sources, targets = [], []
    for v in range(num_nodes):
        out = reader.array(width, reader.scalar("Q"))
        sources.append(np.full(len(out), v, dtype=np.int64))
        targets.append(out)
    targets = np.concatenate(targets)
    if targets.size and targets.max() >= num_nodes:
        raise ValueError(f"{path}: a neighbour id {targets.max()} is not below N = {num_nodes}")
    edges = np.stack([np.concatenate(sources), targets], axis=1)
    labels = None
    for _ in range(reader.scalar("Q")):
        key_type = reader.take(1)[0]
        prop_name = reader.string().decode("utf-8", "replace")
        value_type = reader.take(1)[0]
        count = {0: 1, 1: num_nodes, 2: len(edges)}.get(key_type)
        if count is None:
            raise ValueError(f"{path}: property {prop_name!r} has unknown key type {key_type}")
        values = _gt_values(reader, value_type, count)
        if key_type == 1 and prop_name == ("value" if label_attr is None else label_attr):
            if value_type in (0, 1, 2, 3, 4, _GT_STRING):
                labels = _class_ids(values, f"{path}: vertex property {prop_name!r}")
            elif label_attr is not None:  # asked for; the default "value" (a vector, say) just gives no labels
                raise ValueError(f"{path}: vertex property {prop_name!r} is not scalar; cannot use it as labels")
    name = name if name is not None else os.path.basename(str(path)).split(".gt")[0]  # football.gt.gz -> football
    return Graph(edges, num_nodes, labels=labels, name=name)


# ---------------------------------------------------------------- synthetic assortative graphs

def _community_strengths(rng, memberships, link_probs, link_range, epsilon, expected_edges):
    """``(K,)`` within-community link probabilities ``w_k``: given, drawn in ``link_range``, and
    rescaled to ``expected_edges`` when asked."""
    K = memberships.shape[1]
    if link_probs is None:
        low, high = _link_range(link_range)
        link_probs = rng.uniform(low, high, size=K)
    w = np.asarray(link_probs, dtype=np.float64)
    if w.shape != (K,):
        raise ValueError(f"link_probs must have shape ({K},); got {w.shape}")
    if expected_edges is not None:
        N = memberships.shape[0]
        within = _within_pairs(memberships)
        background = epsilon * (N * (N - 1) / 2 - within.sum())
        if expected_edges <= background:
            raise ValueError(f"expected_edges = {expected_edges} is below the {background:.0f} background links "
                             f"of epsilon = {epsilon}; lower epsilon")
        w = w * (expected_edges - background) / (w @ within)
    if not np.all((w >= 0) & (w <= 1)):  # NaN too: it gave a community of no links, silently
        raise ValueError(f"community link probabilities must lie in [0, 1]; got [{w.min():.3g}, {w.max():.3g}]"
                         " (expected_edges too large for these communities?)")
    return w


def _link_range(link_range):
    """``link_range`` as ``(low, high)``, two numbers with ``0 <= low <= high <= 1``.

    :raises ValueError: naming ``link_range`` otherwise (a reversed range was numpy's "high - low < 0", one
        number "not enough values to unpack").
    """
    try:
        low, high = (float(v) for v in link_range) if not isinstance(link_range, (str, bytes)) else (None, None)
    except (TypeError, ValueError):
        low = high = None
    if low is None or not 0 <= low <= high <= 1:
        raise ValueError(f"link_range must be (low, high), two probabilities with 0 <= low <= high <= 1; "
                         f"got {link_range!r}")
    return low, high


def _within_pairs(memberships):
    """``(K,)`` expected number of pairs ``i < j`` whose two roles both pick community ``k``:
    :math:`\\sum_{i<j} \\pi_{ik} \\pi_{jk} = ((\\sum_i \\pi_{ik})^2 - \\sum_i \\pi_{ik}^2) / 2`."""
    return (memberships.sum(0) ** 2 - (memberships ** 2).sum(0)) / 2


def assortative_link_probability(memberships, link_probs, epsilon, rows=None):
    """Probability of a link between ``i`` in ``rows`` (default all) and every ``j`` under the
    assortative MMSB, with the roles summed out:
    :math:`p_{ij} = \\sum_k \\pi_{ik}\\pi_{jk} w_k + \\epsilon (1 - \\sum_k \\pi_{ik}\\pi_{jk})`.
    Returns ``(len(rows), N)``."""
    pi_rows = memberships if rows is None else memberships[rows]
    same = pi_rows @ memberships.T
    return (pi_rows * link_probs) @ memberships.T + epsilon * (1.0 - same)


def assortative_graph(num_nodes, num_communities, alpha=0.05, link_range=(0.05, 0.3), link_probs=None,
                      epsilon=1e-4, expected_edges=None, sparse=False, block_size=None, seed=0):
    """A graph from the assortative mixed-membership stochastic blockmodel (Gopalan et al. 2012;
    Kim, Gopalan, Blei & Sudderth 2013) with known memberships: :math:`\\pi_i \\sim
    \\text{Dirichlet}(\\alpha 1_K)`; each unordered pair draws roles :math:`s \\sim \\pi_i`,
    :math:`r \\sim \\pi_j` and links with probability :math:`w_k` when :math:`s = r = k`, else
    :math:`\\epsilon`. A small ``alpha`` gives most nodes one dominant community.

    :param int num_nodes: ``N``, the number of nodes (at least 2).
    :param int num_communities: ``K``, the number of communities (at least 1).
    :param link_probs: ``(K,)`` community strengths :math:`w_k`; default uniform in ``link_range``.
    :param float expected_edges: when given, the :math:`w_k` are rescaled together so that the
        expected number of links is this (a density knob); an error if some :math:`w_k` exceeds 1.
    :param bool sparse: ``False`` (exact): the roles are summed out, so each pair links independently
        with :math:`p_{ij}` (:func:`assortative_link_probability`), sampled with numpy over blocks of
        ``block_size`` rows: :math:`O(N^2 K)` time, :math:`O(\\text{block} \\cdot N)` memory; meant
        for ``N`` up to about 20,000. ``True`` (approximate, for ``N`` up to about 100,000 with
        ~10^6 links): community ``k`` gets a Poisson number of links with mean
        :math:`w_k \\sum_{i<j} \\pi_{ik}\\pi_{jk}`, each joining two distinct nodes drawn in
        proportion to :math:`\\pi_{\\cdot k}`, plus Poisson(:math:`\\epsilon N (N-1) / 2`) background
        links between uniform pairs; repeated pairs are merged, so the link count falls slightly
        short of the Poisson draws where communities are dense.
    :param int seed: seed of numpy's generator for the memberships, the strengths (when drawn) and the links.
    :returns: ``(graph, memberships (N, K) float64, labels)`` with ``labels = memberships.argmax(1)``
        (also set as ``graph.labels``).
    """
    N, K = as_positive_int(num_nodes, "num_nodes"), as_positive_int(num_communities, "num_communities")
    if N < 2:
        raise ValueError(f"need num_nodes >= 2 and num_communities >= 1; got {N} and {K}")
    alpha = as_positive_float(alpha, "alpha")  # NaN memberships were replaced by random communities, silently
    if not isinstance(epsilon, numbers.Real) or not 0 <= epsilon <= 1:
        raise ValueError(f"need alpha > 0 and epsilon in [0, 1]; got alpha = {alpha}, epsilon = {epsilon}")
    if expected_edges is not None:
        expected_edges = as_positive_float(expected_edges, "expected_edges")  # NaN gave a graph of no links
    rng = as_rng(seed)
    memberships = rng.dirichlet(np.full(K, float(alpha)), size=N)
    # Dirichlet draws with tiny alpha can underflow to all-zero rows; those nodes get one community
    empty = ~np.isfinite(memberships).all(1) | (memberships.sum(1) <= 0)
    if empty.any():
        memberships[empty] = np.eye(K)[rng.integers(K, size=empty.sum())]
    w = _community_strengths(rng, memberships, link_probs, link_range, epsilon, expected_edges)
    edges = _sparse_links(rng, memberships, w, epsilon) if sparse else \
        _exact_links(rng, memberships, w, epsilon, block_size)
    labels = memberships.argmax(1).astype(np.int64)
    name = f"assortative(N={N}, K={K}{', sparse' if sparse else ''})"
    return Graph(edges, N, labels=labels, name=name), memberships, labels


def _exact_links(rng, memberships, w, epsilon, block_size):
    """Every pair ``i < j`` linked independently with :func:`assortative_link_probability`, by row blocks."""
    N = memberships.shape[0]
    block = max(1, min(N, 4_000_000 // N)) if block_size is None else as_positive_int(block_size, "block_size")
    found = []
    for start in range(0, N - 1, block):
        rows = np.arange(start, min(N, start + block))
        p = assortative_link_probability(memberships, w, epsilon, rows)
        hit = rng.random(p.shape) < p
        i, j = np.nonzero(hit)
        i = i + start
        upper = j > i
        found.append(np.stack([i[upper], j[upper]], axis=1))
    return np.concatenate(found) if found else np.zeros((0, 2), dtype=np.int64)


def _distinct_pairs(rng, count, p):
    """``count`` pairs of distinct nodes, each end drawn independently with probabilities ``p``."""
    out, need = [], count
    while need > 0:
        size = int(need * 1.1) + 16
        a, b = rng.choice(len(p), size=size, p=p), rng.choice(len(p), size=size, p=p)
        keep = a != b
        out.append(np.stack([a[keep], b[keep]], axis=1)[:need])
        need -= len(out[-1])
    return np.concatenate(out) if out else np.zeros((0, 2), dtype=np.int64)


def _sparse_links(rng, memberships, w, epsilon):
    """The approximate ``sparse=True`` sampler of :func:`assortative_graph`."""
    N, K = memberships.shape
    within = _within_pairs(memberships)
    found = []
    for k in range(K):
        count = rng.poisson(w[k] * within[k])
        weights = memberships[:, k]
        if count == 0 or np.count_nonzero(weights) < 2:
            continue
        found.append(_distinct_pairs(rng, count, weights / weights.sum()))
    background = rng.poisson(epsilon * N * (N - 1) / 2)
    if background:
        found.append(_distinct_pairs(rng, background, np.full(N, 1.0 / N)))
    return np.concatenate(found) if found else np.zeros((0, 2), dtype=np.int64)


# ---------------------------------------------------------------- held-out link prediction

def _non_edges(rng, graph, count):
    """``count`` distinct uniform pairs ``i < j`` that are observed non-links of ``graph``: neither links
    nor ``missing`` (unobserved) pairs (rejection sampling)."""
    N = graph.num_nodes
    unobserved = Graph(graph.missing, N)
    keys = np.zeros(0, dtype=np.int64)
    while len(keys) < count:
        size = 2 * (count - len(keys)) + 64
        a, b = rng.integers(N, size=size), rng.integers(N, size=size)
        pairs = np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)[a != b]
        pairs = pairs[~graph.has_edges(pairs) & ~unobserved.has_edges(pairs)]
        new = pairs[:, 0] * np.int64(N) + pairs[:, 1]
        _, first = np.unique(np.concatenate([keys, new]), return_index=True)
        keys = np.concatenate([keys, new])[np.sort(first)]
    keys = keys[:count]
    return np.stack([keys // N, keys % N], axis=1)


def split_pairs(graph, fraction=0.1, seed=0):
    """Held-out link prediction split (as in Gopalan et al. 2012; Kim et al. 2013): a random
    ``fraction`` of the links is removed from the graph, and as many non-links are drawn uniformly
    among the observed unlinked pairs, never a ``missing`` one, whose status is unknown (rejection
    sampling; the ``N x N`` matrix is never formed). A training graph split again (a validation
    split) therefore never labels the first split's held-out links as non-links.

    :returns: ``(train_graph, heldout_pairs (M, 2) int64 with i < j, heldout_labels (M,) int64)``
        where the label is 1 for a held-out link and 0 for a non-link, in random order; the
        training graph keeps the nodes, labels and name, and lists the held-out pairs as
        ``missing`` (unobserved: neither links nor non-links for a model fitted to it).
    :raises ValueError: when ``fraction`` is outside ``(0, 1)`` or there are too few non-links.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"split_pairs needs a pyro_memo.data.Graph; got {type(graph).__name__} (from_adjacency, "
                        "from_networkx or read_edge_list make one)")
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 < fraction < 1:
        raise ValueError(f"fraction must lie in (0, 1); got {fraction!r}")  # '0.1' or None: Python's TypeError
    if graph.num_edges < 1:
        raise ValueError("the graph has no links to hold out")
    rng = as_rng(seed)
    m = max(1, int(round(fraction * graph.num_edges)))
    N = graph.num_nodes
    non_links = N * (N - 1) // 2 - graph.num_edges - len(graph.missing)
    if non_links < m:
        raise ValueError(f"only {non_links} observed unlinked pairs; cannot draw {m} held-out non-links")
    chosen = np.zeros(graph.num_edges, dtype=bool)
    chosen[rng.choice(graph.num_edges, size=m, replace=False)] = True
    links = graph.edges[chosen]
    non = _non_edges(rng, graph, m)
    pairs = np.concatenate([links, non])
    labels = np.concatenate([np.ones(m, dtype=np.int64), np.zeros(m, dtype=np.int64)])
    order = rng.permutation(2 * m)
    train = Graph(graph.edges[~chosen], N, labels=graph.labels, name=graph.name,
                  missing=np.concatenate([graph.missing, pairs]))
    return train, pairs[order], labels[order]
