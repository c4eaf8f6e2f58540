"""Corpus readers, splits and their input checks."""

import numpy as np
import pytest
import scipy.sparse as sp

from pyro_memo.topics import Corpus, from_counts, read_ldac, split_documents, split_tokens, split_types


def test_ldac_round_trip(tmp_path):
    (tmp_path / "c.ldac").write_text("2 0:3 4:1\n1 2:2\n0\n")
    (tmp_path / "v.txt").write_text("a\nb\nc\nd\ne\n")
    corpus = read_ldac(tmp_path / "c.ldac", tmp_path / "v.txt")
    assert corpus.num_docs == 3 and corpus.vocab_size == 5 and corpus.num_tokens == 6
    np.testing.assert_array_equal(corpus.to_dense(), [[3, 0, 0, 0, 1], [0, 0, 2, 0, 0], [0, 0, 0, 0, 0]])
    assert corpus.vocab[4] == "e"


@pytest.mark.parametrize("text,match", [("2 0:3\n", "declares 2"), ("1 x:3\n", "line 1"),
                                        ("1 0:1\n\n1 7:1\n", r"line 3: word id 7 outside the vocabulary \[0, 5\)"),
                                        ("1 0:-1\n", "line 1: count -1 of word 0; counts must be positive"),
                                        ("2 0:1 1:0\n", "line 1: count 0 of word 1"),
                                        ("1 0:nan\n", "line 1: count nan"),
                                        ("1 -2:1\n", "line 1: word id -2"),
                                        ("\n\n", "no documents")])
def test_malformed_ldac_raises(tmp_path, text, match):
    (tmp_path / "c.ldac").write_text(text)
    with pytest.raises(ValueError, match=match):
        read_ldac(tmp_path / "c.ldac", vocab_size=5)


def test_from_counts_accepts_dense_and_sparse_and_rejects_bad_counts():
    dense = np.array([[1, 0, 2], [0, 0, 0], [4, 1, 0]])
    for m in (dense, sp.csr_matrix(dense), sp.coo_matrix(dense)):
        np.testing.assert_array_equal(from_counts(m).to_dense(), dense)
    with pytest.raises(ValueError, match="negative"):
        from_counts(np.array([[1, -1]]))
    with pytest.raises(ValueError, match="NaN"):
        from_counts(np.array([[1, np.nan]]))
    with pytest.raises(ValueError, match="differ in shape"):
        Corpus([0, 1], [0], [1.0, 2.0], 3)


def test_splits_keep_every_token():
    rng = np.random.default_rng(0)
    corpus = from_counts(rng.poisson(1.0, size=(50, 20)))
    train, test = split_documents(corpus, 0.2, seed=1)
    assert train.num_docs + test.num_docs == 50 and test.num_docs == 10
    assert train.num_tokens + test.num_tokens == corpus.num_tokens
    observed, heldout = split_tokens(corpus, 0.5, seed=2)
    np.testing.assert_array_equal(observed.to_dense() + heldout.to_dense(), corpus.to_dense())
    lengths = corpus.to_dense().sum(1)
    assert np.all(np.abs(observed.to_dense().sum(1) - lengths / 2) <= 0.5)


def test_type_split_holds_out_whole_word_types():
    rng = np.random.default_rng(3)
    dense = rng.poisson(0.8, size=(40, 60)) * (rng.random((40, 60)) < 0.6)
    dense[0, :15] = 0  # a document with too few distinct words is left out
    corpus = from_counts(dense)
    observed, heldout, kept = split_types(corpus, 0.2, seed=1)
    unique = (dense > 0).sum(1)
    np.testing.assert_array_equal(kept, np.flatnonzero(unique - np.maximum(10, np.ceil(0.2 * unique)) >= 10))
    o, h = observed.to_dense(), heldout.to_dense()
    np.testing.assert_array_equal(o + h, dense[kept])
    assert not np.any((o > 0) & (h > 0))  # no word type on both sides
    np.testing.assert_array_equal((h > 0).sum(1), np.maximum(10, np.ceil(0.2 * unique[kept])))


@pytest.mark.parametrize("bad", [np.ones((2, 3, 4)), np.array([["a", "b"]]), [[1, 2], [3]]])
def test_from_counts_refuses_what_is_not_a_matrix_of_numbers(bad):
    with pytest.raises(ValueError, match="a count matrix must be a 2-D \\(documents, words\\) array of numbers"):
        from_counts(bad)


@pytest.mark.parametrize("docs", [[-1], [5], [0, 9]])
def test_subset_refuses_indices_outside_the_documents(docs):
    with pytest.raises(ValueError, match=r"document indices must lie in \[0, 5\)"):
        from_counts(np.ones((5, 3))).subset(docs)


@pytest.mark.parametrize("fraction", [float("nan"), -0.5, 1.5, "half", None])
def test_splits_refuse_a_fraction_outside_zero_to_one(fraction):
    # NaN raised 'cannot convert float NaN to integer'; -0.5 split as 0 and 1.5 as 1, silently
    corpus = from_counts(np.random.default_rng(0).poisson(2.0, size=(6, 30)))
    with pytest.raises(ValueError, match=r"^fraction must be a number in \[0, 1\]"):
        split_tokens(corpus, fraction)
    with pytest.raises(ValueError, match=r"^heldout_fraction must be a number in \[0, 1\]"):
        split_types(corpus, fraction)
    for edge in (0, 1):  # every token on one side is a split
        observed, heldout = split_tokens(corpus, edge)
        assert observed.num_tokens + heldout.num_tokens == corpus.num_tokens


@pytest.mark.parametrize("min_size", [-3, 2.5])
def test_type_split_refuses_a_minimum_that_is_not_a_count(min_size):
    with pytest.raises(ValueError, match="min_size must be a non-negative integer"):
        split_types(from_counts(np.ones((3, 30))), 0.2, min_size=min_size)


@pytest.mark.parametrize("bad", [None, np.array([[1, None]], dtype=object), [[1, None], [2, 3]]])
def test_from_counts_refuses_none_instead_of_reading_it_as_no_counts(bad):
    # None became a corpus of one empty document over one word; None entries were dropped as zeros (numpy
    # reads them as NaN, refused as such)
    with pytest.raises(ValueError, match=r"a count matrix must be a 2-D \(documents, words\) array of numbers|NaN"):
        from_counts(bad)
    np.testing.assert_array_equal(from_counts(np.array([[1, 2.5]], dtype=object)).to_dense(), [[1, 2.5]])


def test_a_document_split_leaves_documents_on_both_sides():
    # one document gave an empty training corpus (then 'every document is empty' at fit); 2 documents at
    # test_fraction 0.9 put both in the test part
    with pytest.raises(ValueError, match="needs at least 2 documents; the corpus has 1"):
        split_documents(from_counts(np.ones((1, 3))))
    train, test = split_documents(from_counts(np.ones((2, 3))), 0.9)
    assert train.num_docs == test.num_docs == 1
    with pytest.raises(ValueError, match="test_fraction must be a number"):
        split_documents(from_counts(np.ones((4, 3))), "half")


@pytest.mark.parametrize("content,match", [(b"1 99999999999999999999:1\n", "line 1: not 'N id:count"),
                                           (b"1 0:1\n\xff\xfe\x00\n", "not UTF-8 text")])
def test_ldac_ids_past_int64_and_binary_files_name_the_line(tmp_path, content, match):
    # an id past int64 raised OverflowError, a binary file UnicodeDecodeError
    (tmp_path / "c.ldac").write_bytes(content)
    with pytest.raises(ValueError, match=match):
        read_ldac(tmp_path / "c.ldac")
    (tmp_path / "v.txt").write_bytes(b"\x1f\x8b\x08\x00")
    with pytest.raises(ValueError, match="v.txt: not UTF-8 text"):
        read_ldac(tmp_path / "c.ldac", tmp_path / "v.txt")


def test_a_vocabulary_with_a_repeated_word_names_it_and_its_lines(tmp_path, capsys):
    # was accepted silently: two word ids shared one name
    from pyro_memo.cli import main

    (tmp_path / "c.ldac").write_text("2 0:1 1:2\n1 2:4\n")
    (tmp_path / "vocab.txt").write_text("apple\npear\napple\n")
    with pytest.raises(ValueError, match=r"vocab.txt: the word 'apple' is on lines 1 and 3"):
        read_ldac(tmp_path / "c.ldac", tmp_path / "vocab.txt")
    assert main(["fit", str(tmp_path / "c.ldac"), "--model", "hdp", "--vocab", str(tmp_path / "vocab.txt"),
                 "--K", "2", "--batches", "1", "--init", "documents"]) == 2
    assert "the word 'apple' is on lines 1 and 3" in capsys.readouterr().err


def test_blank_lines_after_a_vocabulary_add_no_words(tmp_path):
    # a vocabulary ending in a blank line had an extra word '' (V = 3 for two words), so that a count
    # matrix of the two words' columns no longer matched the model fitted with it
    (tmp_path / "c.ldac").write_text("2 0:1 1:2\n1 1:4\n")
    (tmp_path / "vocab.txt").write_text("apple\npear\n\n \n")
    corpus = read_ldac(tmp_path / "c.ldac", tmp_path / "vocab.txt")
    assert corpus.vocab == ["apple", "pear"] and corpus.vocab_size == 2


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_an_empty_vocabulary_is_named_not_the_corpus_line(tmp_path, content):
    # was "c.ldac, line 1: word id 1 outside the vocabulary [0, V)", blaming the corpus
    (tmp_path / "c.ldac").write_text("2 0:1 1:2\n")
    (tmp_path / "vocab.txt").write_text(content)
    with pytest.raises(ValueError, match=r"vocab.txt: no words"):
        read_ldac(tmp_path / "c.ldac", tmp_path / "vocab.txt")


def test_a_byte_order_mark_is_not_read_as_part_of_the_first_word_or_id(tmp_path):
    # Windows editors save UTF-8 with a byte order mark: the first word was '\ufeffapple', and an LDA-C or
    # edge-list file's first line was refused ("invalid literal for int() ... '\ufeff2'")
    from pyro_memo.data import read_edge_list

    (tmp_path / "c.ldac").write_bytes("\ufeff2 0:1 1:2\n".encode())
    (tmp_path / "vocab.txt").write_bytes("\ufeffapple\npear\n".encode())
    (tmp_path / "g.edges").write_bytes("\ufeff0 1\n1 2\n".encode())
    assert read_ldac(tmp_path / "c.ldac", tmp_path / "vocab.txt").vocab == ["apple", "pear"]
    assert read_edge_list(tmp_path / "g.edges").num_edges == 2
