"""``pyro-memo fit CORPUS --model hdp``: corpora, JSON, --save files, resume, errors."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from pyro_memo.cli import main
from pyro_memo.synthetic import bars_corpus
from pyro_memo.topics import MemoizedHDP


@pytest.mark.slow
def test_hdp_fit_writes_json_topics_and_resumes(tmp_path, capsys):
    common = ["fit", "bars", "--model", "hdp", "--K", "12", "--algo", "memo", "--batches", "4", "--quiet",
              "--moves", "merge"]
    assert main(common + ["--laps", "2", "--save", str(tmp_path / "run"), "--json", str(tmp_path / "a.json")]) == 0
    out = json.loads((tmp_path / "a.json").read_text())
    assert out["model"] == "hdp" and out["laps"] == 2 and out["init"] == "kmeans"
    assert len(out["moves"]) == 2 and all("merge" in lap for lap in out["moves"])
    assert len(out["top_words"]) == len(out["weights"])
    assert all(len(t["words"]) == 10 for t in out["top_words"])
    lines = (tmp_path / "run" / "topics.txt").read_text().splitlines()
    assert len(lines) == len(out["weights"]) and lines[0].split("\t")[2].startswith("pixel")
    saved = np.load(tmp_path / "run" / "topics.npz")
    np.testing.assert_allclose(saved["topic_word"].sum(1), 1.0)
    assert "topic" in capsys.readouterr().out
    # resuming for 2 more laps continues the same trajectory as one 4-lap fit
    assert main(common + ["--laps", "4", "--resume", str(tmp_path / "run"), "--json", str(tmp_path / "b.json")]) == 0
    assert main(common + ["--laps", "4", "--json", str(tmp_path / "c.json")]) == 0
    resumed = json.loads((tmp_path / "b.json").read_text())["elbo_trace"]
    direct = json.loads((tmp_path / "c.json").read_text())["elbo_trace"]
    assert len(resumed) == 4
    np.testing.assert_allclose(resumed, direct, rtol=1e-8)


def test_hdp_fit_learns_its_hyperparameters_and_resumes_only_alike(tmp_path, capsys):
    common = ["fit", "bars", "--model", "hdp", "--K", "8", "--batches", "4", "--quiet", "--alpha-prior", "1,1",
              "--gamma-prior", "1,0.5", "--learn-lam0"]
    assert main(common + ["--laps", "2", "--save", str(tmp_path / "run"), "--json", str(tmp_path / "a.json")]) == 0
    out = json.loads((tmp_path / "a.json").read_text())
    assert out["alpha"] != 0.5 and out["gamma"] != 10.0 and out["lam0"] != 0.1  # learnt, not the defaults
    assert np.all(np.diff(out["elbo_trace"]) > 0)
    assert main(common + ["--laps", "3", "--resume", str(tmp_path / "run"), "--json", str(tmp_path / "b.json")]) == 0
    assert main(common + ["--laps", "3", "--json", str(tmp_path / "c.json")]) == 0
    np.testing.assert_allclose(json.loads((tmp_path / "b.json").read_text())["elbo_trace"],
                               json.loads((tmp_path / "c.json").read_text())["elbo_trace"], rtol=1e-8)
    plain = ["fit", "bars", "--model", "hdp", "--K", "8", "--batches", "4", "--quiet", "--laps", "3", "--resume",
             str(tmp_path / "run")]
    for extra, option in (([], "--alpha-prior"), (["--alpha-prior", "1,2"], "--alpha-prior"),
                          (["--alpha-prior", "1,1", "--gamma-prior", "1,0.5"], "--learn-lam0")):
        capsys.readouterr()
        assert main(plain + extra) != 0
        assert f"the saved fit has {option}" in capsys.readouterr().err


def test_hdp_fit_reads_ldac_and_npz(tmp_path):
    corpus, _, _ = bars_corpus(60, 30, seed=1)
    sp.save_npz(tmp_path / "c.npz", sp.csr_matrix(corpus.to_dense()))
    assert main(["fit", str(tmp_path / "c.npz"), "--model", "hdp", "--K", "5", "--laps", "2", "--quiet",
                 "--json", str(tmp_path / "n.json")]) == 0
    defaults = json.loads((tmp_path / "n.json").read_text())
    assert defaults["algo"] == "memo" and defaults["batches"] == 10 and defaults["init"] == "kmeans"
    lines = []
    for d in range(corpus.num_docs):
        lo, hi = corpus.doc_ptr[d], corpus.doc_ptr[d + 1]
        pairs = " ".join(f"{w}:{int(c)}" for w, c in zip(corpus.word_ids[lo:hi], corpus.counts[lo:hi], strict=True))
        lines.append(f"{hi - lo} {pairs}")
    (tmp_path / "c.ldac").write_text("\n".join(lines) + "\n")
    (tmp_path / "vocab.txt").write_text("\n".join(corpus.vocab) + "\n")
    assert main(["fit", str(tmp_path / "c.ldac"), "--model", "hdp", "--K", "5", "--laps", "2", "--quiet",
                 "--init", "documents", "--json", str(tmp_path / "o.json")]) == 0
    out = json.loads((tmp_path / "o.json").read_text())
    assert out["V"] == 25 and out["init"] == "documents"


@pytest.mark.parametrize("argv,message", [
    (["fit", "--model", "hdp"], "needs a corpus"),
    (["fit", "nowhere.ldac", "--model", "hdp"], "no such file"),
    (["fit", "bars", "--model", "hdp", "--gamma", "0"], "--gamma must be positive"),
    (["fit", "bars", "--model", "hdp", "--moves", "merge,split", "--algo", "memo"], "split is not available"),
    (["fit", "bars", "--model", "hdp", "--algo", "memo", "--batches", "100000"], "exceeds the number of documents"),
    (["fit", "bars", "--model", "hdp", "--birth-new", "5"], "--birth-new sets the birth move; add birth to --moves"),
    (["fit", "bars", "--model", "hdp", "--moves", "merge", "--birth-targets", "2"],
     "--birth-targets sets the birth move"),
    (["fit", "bars", "--model", "hdp", "--moves", "birth", "--birth-new", "1"], "--birth-new must be at least 2"),
    (["fit", "bars", "--model", "hdp", "--moves", "birth", "--birth-targets", "0"],
     "--birth-targets must be a positive integer"),
])
def test_hdp_fit_errors_name_the_problem(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_vocab_folder_is_named_a_folder(tmp_path, capsys):
    """--vocab DIR said "no such file" for a folder that exists."""
    (tmp_path / "c.ldac").write_text("2 0:1 1:2\n")
    assert main(["fit", str(tmp_path / "c.ldac"), "--model", "hdp", "--vocab", str(tmp_path)]) == 2
    assert f"--vocab {tmp_path}: a folder, not a vocabulary file" in capsys.readouterr().err


def test_out_of_memory_from_a_vocabulary_inferred_from_a_huge_word_id_names_it(tmp_path, capsys):
    # was "out of memory (lower --K or use less data): ... 745 GiB", pointing at --K
    rng = np.random.default_rng(0)
    lines = ["2 1000000000000000:1 3:2"] + [f"2 {rng.integers(10)}:1 {rng.integers(10, 20)}:2" for _ in range(40)]
    (tmp_path / "big.ldac").write_text("\n".join(lines) + "\n")
    assert main(["fit", str(tmp_path / "big.ldac"), "--model", "hdp", "--K", "3", "--laps", "1"]) == 2
    err = capsys.readouterr().err
    assert "out of memory (V = 1000000000000001 words, the largest word id in" in err and "--vocab" in err
    assert "lower --K or use less data" not in err


def test_hdp_fit_reads_a_sharded_corpus_one_shard_per_batch_and_resumes(tmp_path, capsys):
    from pyro_memo.data import write_corpus_shards

    corpus = bars_corpus(120, 40, seed=2)[0]
    write_corpus_shards(corpus, tmp_path / "shards", num_shards=3)
    common = ["fit", str(tmp_path / "shards"), "--model", "hdp", "--K", "6", "--quiet"]
    assert main(common + ["--laps", "2", "--save", str(tmp_path / "run"), "--json", str(tmp_path / "a.json")]) == 0
    out = json.loads((tmp_path / "a.json").read_text())
    assert (out["batches"], out["documents"], out["tokens"]) == (3, 120, corpus.num_tokens)
    assert out["top_words"][0]["words"][0].startswith("pixel")
    assert main(common + ["--laps", "3", "--resume", str(tmp_path / "run"), "--json", str(tmp_path / "b.json")]) == 0
    assert main(common + ["--laps", "3", "--json", str(tmp_path / "c.json")]) == 0
    np.testing.assert_allclose(json.loads((tmp_path / "b.json").read_text())["elbo_trace"],
                               json.loads((tmp_path / "c.json").read_text())["elbo_trace"], rtol=1e-8)
    assert main(common + ["--batches", "4"]) == 2
    assert "fitted one batch per shard (3 shards)" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "shards"), "--model", "hdp"]) == 2
    assert "pyro-memo fit takes shards" in capsys.readouterr().err


def test_birth_options_reach_the_topic_birth_move(tmp_path):
    """--birth-new and --birth-targets are TopicBirthMove's num_new and num_targets: reported in the JSON,
    the same fit as the library's MemoizedHDP with move_options, and another fit than the defaults'."""
    common = ["fit", "bars", "--model", "hdp", "--algo", "memo", "--K", "1", "--batches", "2", "--laps", "5",
              "--moves", "birth,merge", "--quiet"]
    assert main(common + ["--birth-new", "4", "--birth-targets", "2", "--json", str(tmp_path / "b.json")]) == 0
    assert main(common + ["--json", str(tmp_path / "d.json")]) == 0
    given, defaults = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "bd")
    assert (given["birth_new"], given["birth_targets"]) == (4, 2)
    assert (defaults["birth_new"], defaults["birth_targets"]) == (3, 1)
    memo = MemoizedHDP(K=1, laps=5, tol=1e-7, seed=0, moves="birth,merge",
                       move_options={"birth": {"num_new": 4, "num_targets": 2}})
    assert (memo.moves[0].num_new, memo.moves[0].num_targets) == (4, 2)
    np.testing.assert_allclose(given["elbo_trace"], memo.fit(bars_corpus()[0], 2).elbo_trace, rtol=1e-9)
    assert not np.allclose(given["elbo_trace"], defaults["elbo_trace"])


def test_a_resume_with_other_moves_sums_each_move_over_the_laps_that_ran_it(tmp_path, capsys):
    """The summary's move totals count every move of the whole run: a resume with fewer moves (the laps
    before it logged one more) or with moves after laps without any printed a KeyError or no totals."""
    corpus = bars_corpus(60, 30, seed=1)[0]
    sp.save_npz(tmp_path / "c.npz", sp.csr_matrix(corpus.to_dense()))
    common = ["fit", str(tmp_path / "c.npz"), "--model", "hdp", "--K", "4", "--batches", "2"]
    for first, then in ((["--moves", "merge,delete"], ["--moves", "merge"]), ([], ["--moves", "merge"])):
        run = str(tmp_path / f"run{len(first)}")
        assert main(common + first + ["--laps", "1", "--quiet", "--save", run]) == 0
        capsys.readouterr()
        assert main(common + then + ["--laps", "2", "--quiet", "--resume", run]) == 0
        moves = [line for line in capsys.readouterr().out.splitlines() if line.startswith("moves")]
        assert len(moves) == 1 and "merge" in moves[0]
        assert ("delete" in moves[0]) == bool(first)


def test_json_onto_a_file_read_beside_the_corpus_is_refused_and_kept(tmp_path, capsys):
    # --json DIR/vocab.txt overwrote the vocabulary read beside DIR/c.ldac (no --vocab), and --json
    # shards/corpus.json a sharded corpus's index, with the JSON results
    from pyro_memo.data import read_ldac, write_corpus_shards

    (tmp_path / "c.ldac").write_text("2 0:1 1:2\n1 1:4\n2 0:3 1:1\n")
    (tmp_path / "vocab.txt").write_text("apple\npear\n")
    write_corpus_shards(read_ldac(tmp_path / "c.ldac", tmp_path / "vocab.txt"), tmp_path / "shards", num_shards=2)
    for data, written in ((tmp_path / "c.ldac", tmp_path / "vocab.txt"),
                          (tmp_path / "shards", tmp_path / "shards" / "corpus.json")):
        before = written.read_bytes()
        assert main(["fit", str(data), "--model", "hdp", "--K", "2", "--laps", "1", "--batches", "2", "--quiet",
                     "--json", str(written)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("pyro-memo: error: --json") and "names the input" in err, err
        assert written.read_bytes() == before
