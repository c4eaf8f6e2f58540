"""``pyro-memo fit GRAPH --model relational``: graph files, JSON, --save files, resume, held-out links."""

import json

import numpy as np
import pytest

from pyro_memo.cli import main
from pyro_memo.data import assortative_graph


def _edges():
    graph, _, _ = assortative_graph(60, 3, link_probs=np.full(3, 0.4), epsilon=1e-3, seed=2)
    return graph.edges


@pytest.fixture(scope="module")
def graph_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("graphs")
    edges = _edges()
    (d / "g.csv").write_text("source,target\n" + "".join(f"{i},{j}\n" for i, j in edges))
    (d / "g.edges").write_text("# a comment\n" + "".join(f"{i}\t{j}\n" for i, j in edges))
    (d / "g.txt").write_text("".join(f"{i} {j}\n" for i, j in edges))
    return d


@pytest.mark.parametrize("name", ["g.csv", "g.edges", "g.txt"])
def test_fit_reads_edge_lists_and_writes_json(graph_files, tmp_path, capsys, name):
    path = tmp_path / "out.json"
    assert main(["fit", str(graph_files / name), "--model", "relational", "--K", "3", "--laps", "3", "--quiet",
                 "--json", str(path)]) == 0
    out = json.loads(path.read_text())
    for key in ("elbo", "elbo_trace", "K", "weights", "lap_seconds", "seconds", "laps", "converged", "nodes",
                "edges", "link_probabilities", "alpha"):
        assert key in out, key
    assert out["nodes"] == 60 and out["edges"] == len(_edges()) and out["laps"] == 3
    assert len(out["weights"]) == len(out["link_probabilities"]) == 3
    assert all(0 < p < 1 for p in out["link_probabilities"])
    assert "nmi" not in out and "heldout_auc" not in out  # no labels in an edge list; no --heldout
    printed = capsys.readouterr().out
    assert "assortative HDP relational model" in printed and "communities with E[beta]" in printed


def test_save_writes_the_posterior_and_resume_continues_the_same_trajectory(graph_files, tmp_path, capsys):
    common = ["fit", str(graph_files / "g.txt"), "--model", "relational", "--K", "4", "--batches", "3",
              "--tol", "0", "--quiet", "--alpha-prior", "1,1"]
    run = tmp_path / "run"
    assert main(common + ["--laps", "2", "--save", str(run)]) == 0
    saved = np.load(run / "posterior.npz")
    assert set(saved.files) == {"memberships", "labels", "weights", "link_probabilities"}
    assert saved["memberships"].shape == (60, 4) and saved["labels"].shape == (60,)
    assert saved["weights"].shape == (4,) and saved["link_probabilities"].shape == (4,)
    np.testing.assert_array_equal(saved["labels"], saved["memberships"].argmax(1))
    assert np.all(saved["memberships"].sum(1) <= 1 + 1e-12)
    assert (run / "trace.png").stat().st_size > 0 and (run / "state.pt").is_file()
    assert main(common + ["--laps", "4", "--resume", str(run), "--json", str(tmp_path / "b.json")]) == 0
    assert main(common + ["--laps", "4", "--json", str(tmp_path / "c.json")]) == 0
    resumed = json.loads((tmp_path / "b.json").read_text())
    direct = json.loads((tmp_path / "c.json").read_text())
    assert len(resumed["elbo_trace"]) == 4 and resumed["resumed_laps"] == 2
    np.testing.assert_allclose(resumed["elbo_trace"], direct["elbo_trace"], rtol=1e-8)
    # a resume with other options or another graph is refused, naming what differs
    other = tmp_path / "other.txt"
    other.write_text("".join(f"{i} {j}\n" for i, j in _edges()) + "60 61\n")
    for argv, name in ((common + ["--K", "5"], "--K"), (common + ["--eps", "0.001"], "--eps"),
                       (common + ["--batches", "2"], "--batches"),
                       ([a for a in common if a not in ("--alpha-prior", "1,1")], "--alpha-prior"),
                       (common + ["--alpha-prior", "2,1"], "--alpha-prior"),
                       (common + ["--heldout", "0.2"], "links"),
                       ([common[0], str(other)] + common[2:], "nodes")):
        capsys.readouterr()
        assert main(argv + ["--laps", "5", "--resume", str(run)]) == 2, name
        err = capsys.readouterr().err
        assert f"the saved fit has {name}" in err, (name, err)
    plain = [a for a in common if a not in ("--alpha-prior", "1,1")]
    assert main(plain + ["--laps", "2", "--save", str(tmp_path / "fixed")]) == 0
    capsys.readouterr()
    assert main(plain + ["--alpha", "2", "--laps", "3", "--resume", str(tmp_path / "fixed")]) == 2
    assert "the saved fit has --alpha" in capsys.readouterr().err


def test_heldout_on_the_synthetic_graph_reports_auc_and_labels(tmp_path, capsys):
    path = tmp_path / "h.json"
    assert main(["fit", "synthetic", "--model", "relational", "--K", "6", "--laps", "6", "--heldout", "0.1",
                 "--quiet", "--json", str(path)]) == 0
    out = json.loads(path.read_text())
    assert 0.5 < out["heldout_auc"] <= 1 and out["heldout_log_lik"] < 0
    assert out["heldout_pairs"] == 2 * round(0.1 * out["edges"])
    assert 0 <= out["nmi"] <= 1 and 0 < out["accuracy"] <= 1
    printed = capsys.readouterr().out
    assert "AUC" in printed and "NMI" in printed


def test_karate_has_labels(tmp_path):
    pytest.importorskip("networkx")
    path = tmp_path / "k.json"
    assert main(["fit", "karate", "--model", "relational", "--K", "2", "--laps", "5", "--quiet",
                 "--json", str(path)]) == 0
    out = json.loads(path.read_text())
    assert out["nodes"] == 34 and out["edges"] == 78 and "nmi" in out


def test_self_loops_are_dropped_and_reported(tmp_path, capsys):
    (tmp_path / "loops.edges").write_text("".join(f"{i} {j}\n" for i, j in _edges()) + "5 5\n7 7\n")
    assert main(["fit", str(tmp_path / "loops.edges"), "--model", "relational", "--K", "3", "--laps", "1",
                 "--json", str(tmp_path / "l.json")]) == 0
    out = json.loads((tmp_path / "l.json").read_text())
    assert out["edges"] == len(_edges()) and out["self_loops_dropped"] == 2
    assert "2 self loops dropped" in capsys.readouterr().out


@pytest.mark.parametrize("shift, said", [
    (1, "(1 node without links; ids are kept as given, so an edge list numbered from 1 leaves node 0 without links)"),
    (0, "(2 nodes without links)")])
def test_nodes_without_links_are_reported(tmp_path, capsys, shift, said):
    # a file numbered from 1 gave an isolated node 0 without a word
    lines = "".join(f"{i + shift} {j + shift}\n" for i, j in _edges() if shift or 5 not in (i, j) and 7 not in (i, j))
    (tmp_path / "g.edges").write_text(lines)
    assert main(["fit", str(tmp_path / "g.edges"), "--model", "relational", "--K", "3", "--laps", "1"]) == 0
    assert said in capsys.readouterr().out


def test_a_graph_with_every_node_linked_reports_none_without_links(graph_files, capsys):
    assert main(["fit", str(graph_files / "g.txt"), "--model", "relational", "--K", "3", "--laps", "1"]) == 0
    assert "without links" not in capsys.readouterr().out


def test_npz_adjacency(tmp_path):
    import scipy.sparse as sp

    edges = _edges()
    sp.save_npz(tmp_path / "a.npz", sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])),
                                                  shape=(60, 60)).tocsr())
    assert main(["fit", str(tmp_path / "a.npz"), "--model", "relational", "--K", "3", "--laps", "2", "--quiet",
                 "--json", str(tmp_path / "n.json")]) == 0
    assert json.loads((tmp_path / "n.json").read_text())["edges"] == len(edges)


def test_moves_grow_the_communities_and_are_reported(tmp_path):
    from pyro_memo.data import assortative_graph

    graph, _, _ = assortative_graph(200, 2, link_probs=np.full(2, 0.3), epsilon=1e-3, seed=5)
    path = tmp_path / "g.txt"
    np.savetxt(path, graph.edges, fmt="%d")
    assert main(["fit", str(path), "--model", "relational", "--K", "1", "--moves", "birth,delete,merge", "--laps",
                 "12", "--batches", "2", "--quiet", "--json", str(tmp_path / "m.json")]) == 0
    out = json.loads((tmp_path / "m.json").read_text())
    assert len(out["moves"]) == out["laps"] and set(out["moves"][0]) == {"birth", "delete", "merge"}
    assert sum(lap["birth"]["accepted"] for lap in out["moves"]) >= 1 and out["K"] >= 2


def test_learn_eps_reports_the_learnt_value_and_resumes_only_with_it(graph_files, tmp_path, capsys):
    common = ["fit", str(graph_files / "g.txt"), "--model", "relational", "--K", "3", "--tol", "0", "--quiet"]
    run = tmp_path / "run"
    assert main(common + ["--learn-eps", "--laps", "3", "--save", str(run), "--json", str(tmp_path / "a.json")]) == 0
    out = json.loads((tmp_path / "a.json").read_text())
    assert out["learn_eps"] and out["eps"] != 1e-4 and 0 < out["eps"] < 1
    assert "(learnt)" in capsys.readouterr().out
    assert main(common + ["--learn-eps", "--laps", "5", "--resume", str(run), "--json", str(tmp_path / "b.json")]) == 0
    assert json.loads((tmp_path / "b.json").read_text())["resumed_laps"] == 3
    capsys.readouterr()
    assert main(common + ["--laps", "5", "--resume", str(run)]) == 2
    assert "the saved fit has --learn-eps" in capsys.readouterr().err


def test_out_of_memory_from_a_node_count_set_by_a_huge_node_id_names_it(tmp_path, capsys, monkeypatch):
    # was "out of memory (lower --K or use less data): Unable to allocate 22.4 GiB ...", pointing at --K,
    # for an edge list whose ids 0, 1 and 3000000000 made 3,000,000,001 nodes
    from pyro_memo.relational import MemoizedRelational

    def no_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate 22.4 GiB for an array with shape (3000000001,) and data type int64")

    monkeypatch.setattr(MemoizedRelational, "fit", no_memory)
    (tmp_path / "sparse.edges").write_text("0 1\n1 3000000000\n")
    assert main(["fit", str(tmp_path / "sparse.edges"), "--model", "relational", "--K", "2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "out of memory (N = 3000000001 nodes, the largest node id in" in err and "renumber" in err
    assert "lower --K or use less data" not in err


@pytest.mark.parametrize("model", ["relational", "hdp"])
def test_a_fit_goes_on_when_its_stdout_reader_has_gone(tmp_path, model):
    """``pyro-memo fit ... | head -1``: each lap prints a line, and once the reader had gone the next lap's line
    raised BrokenPipeError, which stopped the fit ("pyro-memo: error: [Errno 32] Broken pipe", exit 2) without
    its JSON. The fit now goes on, writes its JSON for every lap and exits 0."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    data = ["karate", "--model", "relational", "--K", "2", "--tol", "0"] if model == "relational" \
        else ["bars", "--model", "hdp", "--K", "4", "--tol", "0"]
    out = tmp_path / "r.json"
    process = subprocess.Popen([sys.executable, "-m", "pyro_memo.cli", "fit", *data, "--laps", "6",
                                "--json", str(out)], env={**os.environ, "PYTHONPATH": str(root)},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = process.stdout.readline()
    process.stdout.close()  # the reader has its line and goes
    status = process.wait(timeout=600)
    assert first.startswith("lap 1:") and status == 0, process.stderr.read()
    assert json.loads(out.read_text())["laps"] == 6
