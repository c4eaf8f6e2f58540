"""A corpus sharded on disk (issue #17 item 3): shards are exact copies of the corpus's documents, an HDP fit
over the shards equals the fit over the corpus in memory with the same batches, and damaged or mismatched
shard sets are one clear error."""

import json
import os

import numpy as np
import pytest

from pyro_memo.data import CorpusShards, bars_corpus, is_corpus_shards, shard_ldac, write_corpus_shards
from pyro_memo.topics import MemoizedHDP


@pytest.fixture
def corpus():
    return bars_corpus(90, 40, seed=3)[0]


def test_shards_hold_the_corpus_documents(tmp_path, corpus):
    shards = write_corpus_shards(corpus, tmp_path / "s", num_shards=4, seed=7)
    assert is_corpus_shards(tmp_path / "s") and not is_corpus_shards(tmp_path)
    again = CorpusShards(tmp_path / "s")
    assert (again.num_batches, again.num_docs, again.vocab_size) == (4, corpus.num_docs, corpus.vocab_size)
    assert again.num_tokens == corpus.num_tokens
    parts = [np.sort(p) for p in np.array_split(np.random.default_rng(7).permutation(corpus.num_docs), 4)]
    for b, part in enumerate(parts):
        np.testing.assert_array_equal(again.batch(b).to_dense(), corpus.subset(part).to_dense())
    assert repr(shards).startswith("CorpusShards(")


def test_a_sample_reads_distinct_documents_of_the_corpus(tmp_path, corpus):
    shards = write_corpus_shards(corpus, tmp_path / "s", docs_per_shard=25)
    assert shards.num_batches == 4
    dense = {tuple(row) for row in corpus.to_dense()}
    sample = shards.sample(30, seed=1)
    assert sample.num_docs == 30 and all(tuple(row) in dense for row in sample.to_dense())
    np.testing.assert_array_equal(shards.sample(10**6).to_dense(), corpus.to_dense())


def test_an_hdp_fit_over_shards_equals_the_fit_in_memory(tmp_path, corpus):
    write_corpus_shards(corpus, tmp_path / "s", num_shards=5, seed=2)
    make = lambda: MemoizedHDP(K=6, laps=4, tol=0, seed=2, moves="birth,merge,delete")  # noqa: E731
    disk = make()
    disk.init_docs = corpus.num_docs
    start = disk.initial_posterior(disk.make_source(str(tmp_path / "s"), None))
    memory = make().fit(corpus, 5, posterior=start)
    disk = make().fit(str(tmp_path / "s"), posterior=start)
    np.testing.assert_allclose(disk.elbo_trace, memory.elbo_trace, rtol=1e-12)
    assert disk.state.move_log == memory.state.move_log


def test_bad_shard_sets_are_clear_errors(tmp_path, corpus):
    write_corpus_shards(corpus, tmp_path / "s", num_shards=3)
    with pytest.raises(ValueError, match="one shard per batch .3 shards.; got num_batches=5"):
        MemoizedHDP(K=3, laps=1).fit(str(tmp_path / "s"), 5)
    with pytest.raises(ValueError, match="already holds corpus shards"):
        write_corpus_shards(corpus, tmp_path / "s", num_shards=3)
    with pytest.raises(ValueError, match="give one of num_shards and docs_per_shard"):
        write_corpus_shards(corpus, tmp_path / "t")
    with pytest.raises(ValueError, match="not a corpus shard directory"):
        CorpusShards(tmp_path)
    (tmp_path / "s" / "shard-00001.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="shard-00001.npz: not a readable corpus shard"):
        MemoizedHDP(K=3, laps=2, init="documents").fit(str(tmp_path / "s"))
    index = tmp_path / "s" / "corpus.json"
    index.write_text(json.dumps(dict(json.loads(index.read_text()), version=99)))
    with pytest.raises(ValueError, match="not a pyro-memo corpus shard index"):
        CorpusShards(tmp_path / "s")
    other = bars_corpus(10, 20, seed=0)[0]
    shards = CorpusShards.create(tmp_path / "u", corpus.vocab_size + 1)
    with pytest.raises(ValueError, match="vocabulary has"):
        shards.append(other)
    assert shards.num_batches == 0 and os.listdir(tmp_path / "u") == ["corpus.json"]


def test_a_failed_sharding_leaves_no_readable_shard_set(tmp_path):
    """shard_ldac stopped by a bad word id on line 5 left an index of the two shards written before it: a
    readable corpus of 4 of the file's 6 documents, which MemoizedHDP fitted without a word."""
    lines = ["2 0:1 3:2", "1 2:1", "2 1:1 2:4", "1 0:3", "1 9:1", "1 3:1"]
    (tmp_path / "c.ldac").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line 5: word id 9 outside the vocabulary"):
        shard_ldac(tmp_path / "c.ldac", tmp_path / "s", docs_per_shard=2, vocab_size=5)
    assert not is_corpus_shards(tmp_path / "s")
    with pytest.raises(TypeError, match="fit needs a pyro_memo.topics.Corpus or a CorpusShards directory"):
        MemoizedHDP(K=2, laps=1).fit(str(tmp_path / "s"))
    shards = shard_ldac(tmp_path / "c.ldac", tmp_path / "s", docs_per_shard=2)  # the same directory again
    assert (shards.num_batches, shards.num_docs) == (3, 6)


def test_a_shard_whose_tokens_disagree_with_the_index_is_named(tmp_path, corpus):
    """The index's tokens are the corpus's num_tokens, by which a fit's bound is reported per token: an index
    that counted 500 tokens too many in shard 0 of a 1,800-token corpus gave -2.61 nats per token for -3.34,
    without a word."""
    write_corpus_shards(corpus, tmp_path / "s", num_shards=3)
    index = tmp_path / "s" / "corpus.json"
    meta = json.loads(index.read_text())
    meta["tokens"][0] += 500
    index.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"shard-00000.npz holds \d+ tokens; the index corpus.json says"):
        MemoizedHDP(K=3, laps=1).fit(str(tmp_path / "s"))


@pytest.mark.parametrize("kwargs,match", [({"docs_per_shard": 0}, "docs_per_shard must be a positive integer"),
                                          ({"num_shards": 2.5}, "num_shards must be a positive integer"),
                                          ({"num_shards": "2"}, "num_shards must be a positive integer"),
                                          ({"num_shards": 2, "seed": -1}, "seed must be a whole number")])
def test_shard_counts_and_seeds_are_named(tmp_path, corpus, kwargs, match):
    # docs_per_shard=0 was a ZeroDivisionError, num_shards=2.5 silently two shards
    with pytest.raises(ValueError, match=match):
        write_corpus_shards(corpus, tmp_path / "s", **kwargs)


@pytest.mark.parametrize("meta,match", [([1, 2], "a JSON list, not an object"),
                                        ({"format": "pyro-memo corpus shards", "version": 1},
                                         "without vocab_size, shards, docs, tokens"),
                                        ({"format": "pyro-memo corpus shards", "version": 1, "vocab_size": 5,
                                          "shards": "a.npz", "docs": [1], "tokens": [1]}, "malformed")])
def test_a_malformed_index_is_named(tmp_path, meta, match):
    # a list was an AttributeError ('list' object has no attribute 'get'), missing keys a KeyError
    (tmp_path / "corpus.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=f"corpus.json: .*{match}"):
        CorpusShards(tmp_path)


def test_a_file_instead_of_a_directory_and_a_matrix_to_append_are_named(tmp_path, corpus):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a corpus shard directory"):  # was NotADirectoryError
        CorpusShards(tmp_path / "file")
    shards = CorpusShards.create(tmp_path / "s", corpus.vocab_size)
    with pytest.raises(TypeError, match="append takes a pyro_memo.topics.Corpus.*got ndarray"):  # AttributeError
        shards.append(np.zeros((3, corpus.vocab_size)))


def test_an_ldac_file_is_sharded_as_it_is_read(tmp_path, corpus):
    from pyro_memo.data import read_ldac

    lines = []
    for d in range(corpus.num_docs):
        lo, hi = corpus.doc_ptr[d], corpus.doc_ptr[d + 1]
        pairs = " ".join(f"{w}:{int(c)}" for w, c in zip(corpus.word_ids[lo:hi], corpus.counts[lo:hi], strict=True))
        lines.append(f"{hi - lo} {pairs}\n")
    (tmp_path / "c.ldac").write_text("".join(lines))
    (tmp_path / "vocab.txt").write_text("".join(w + "\n" for w in corpus.vocab))
    shards = shard_ldac(tmp_path / "c.ldac", tmp_path / "s", 40, vocab_path=tmp_path / "vocab.txt")
    assert shards.num_batches == 3 and shards.vocab == corpus.vocab
    whole = read_ldac(tmp_path / "c.ldac", tmp_path / "vocab.txt")
    np.testing.assert_array_equal(shards.sample(10**6).to_dense(), whole.to_dense())
    np.testing.assert_array_equal(whole.to_dense(), corpus.to_dense())
    (tmp_path / "bad.ldac").write_text("2 1:1\n")
    with pytest.raises(ValueError, match="line 1: declares 2 distinct words, lists 1"):
        shard_ldac(tmp_path / "bad.ldac", tmp_path / "t", 10)
