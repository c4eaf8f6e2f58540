"""The scikit-learn estimator HDPTopics: sklearn's own conventions, topic recovery, proportions and scores."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.metrics import adjusted_rand_score
from sklearn.utils.estimator_checks import check_estimator

from pyro_memo import ConvergenceWarning, HDPTopics

V = 30


def three_topic_docs(n=90, length=40, seed=0):
    """Documents each drawn from one of 3 topics uniform over disjoint thirds of a 30-word
    vocabulary: ``(counts (n, V) int64, generating topic (n,))``."""
    rng = np.random.default_rng(seed)
    topics = np.zeros((3, V))
    for k in range(3):
        topics[k, k * 10:(k + 1) * 10] = 0.1
    z = np.arange(n) % 3
    rng.shuffle(z)
    return np.stack([rng.multinomial(length, topics[k]) for k in z]), z


@pytest.fixture(scope="module")
def fitted():
    x, z = three_topic_docs()
    return HDPTopics(n_components=3, max_iter=30, random_state=0).fit(x), x, z


@pytest.mark.slow
@pytest.mark.parametrize("params", [dict(), dict(moves="birth,merge,delete")])
def test_check_estimator_passes(params):
    results = check_estimator(HDPTopics(n_components=3, max_iter=3, **params), on_fail=None, on_skip=None)
    failed = [(r["check_name"], repr(r["exception"])) for r in results if r["status"] == "failed"]
    assert len(results) > 30 and not failed


def test_three_topics_are_recovered(fitted):
    est, x, z = fitted
    proportions = est.transform(x)
    assert proportions.shape == (len(x), 3) and est.n_components_ == 3
    assert adjusted_rand_score(z, proportions.argmax(1)) > 0.9
    assert np.allclose(proportions.sum(1), 1.0) and np.all(proportions >= 0)
    assert est.components_.shape == (3, V) and np.allclose(est.components_.sum(1), 1.0)
    # each fitted topic puts nearly all its mass on one generating topic's ten words
    blocks = est.components_.reshape(3, 3, 10).sum(2)
    assert np.all(blocks.max(1) > 0.9) and len(set(blocks.argmax(1))) == 3
    assert est.topic_weights_.shape == (3,) and np.all(est.topic_weights_ > 0) and est.topic_weights_.sum() < 1
    assert est.n_iter_ >= 1 and np.isfinite(est.bound_) and est.n_features_in_ == V
    assert np.allclose(est.components_, est.posterior_.topic_means().numpy())


def test_fit_transform_equals_fit_then_transform():
    x, _ = three_topic_docs(45)
    est = HDPTopics(n_components=3, max_iter=10, random_state=1)
    assert np.allclose(est.fit_transform(x), clone(est).fit(x).transform(x), atol=1e-12)


def test_float32_float64_and_integer_inputs_agree(fitted):
    est, x, _ = fitted
    test, _ = three_topic_docs(30, seed=5)
    a, b, c = est.transform(test.astype(np.float32)), est.transform(test.astype(np.float64)), est.transform(test)
    assert np.allclose(a, b, atol=1e-10) and np.array_equal(a.argmax(1), b.argmax(1))
    assert np.allclose(b, c, atol=1e-10)
    other = HDPTopics(n_components=3, max_iter=30, random_state=0).fit(x.astype(np.float32))
    assert np.allclose(other.components_, est.components_, atol=1e-8)


def test_sparse_and_dense_inputs_agree(fitted):
    est, x, _ = fitted
    for fmt in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix):
        assert np.allclose(est.transform(fmt(x)), est.transform(x), atol=1e-10)
    other = HDPTopics(n_components=3, max_iter=30, random_state=0).fit(sp.csr_matrix(x))
    assert np.allclose(other.components_, est.components_, atol=1e-8)
    assert np.isclose(other.score(sp.csr_matrix(x)), est.score(x))


def test_moves_grow_one_topic_into_the_three():
    x, z = three_topic_docs()
    est = HDPTopics(n_components=1, moves="birth,merge,delete", max_iter=20, random_state=0).fit(x)
    assert est.n_components_ >= 3
    proportions = est.transform(x)
    assert proportions.shape == (len(x), est.n_components_)
    assert adjusted_rand_score(z, proportions.argmax(1)) > 0.9


def test_move_options_reach_the_topic_moves():
    x, _ = three_topic_docs()
    est = HDPTopics(n_components=1, moves="birth,merge", max_iter=4, random_state=0)
    wider = clone(est).set_params(move_options={"birth": {"num_new": 4}}).fit(x)
    assert wider.bound_ != est.fit(x).bound_
    with pytest.raises(ValueError, match="move_options: the birth move has no option targets"):
        clone(est).set_params(move_options={"birth": {"targets": 2}}).fit(x)


def test_non_integer_weights_are_accepted_as_fractional_tokens():
    x, z = three_topic_docs()
    est = HDPTopics(n_components=3, max_iter=30, random_state=0).fit(x * 0.37)
    assert adjusted_rand_score(z, est.transform(x * 0.37).argmax(1)) > 0.9


def test_empty_documents_get_the_prior_proportions(fitted):
    est, x, _ = fitted
    out = est.transform(np.vstack([x[:2], np.zeros((1, V))]))
    prior = est.topic_weights_ / est.topic_weights_.sum()
    assert np.allclose(out[2], prior) and not np.allclose(out[0], prior, atol=1e-3)
    assert np.allclose(est.score_samples(np.zeros((2, V))), 0.0)
    with_empty = np.vstack([x, np.zeros((5, V))])
    other = HDPTopics(n_components=3, max_iter=30, random_state=0).fit(with_empty)
    assert np.allclose(np.sort(other.components_.max(1)), np.sort(est.components_.max(1)), atol=1e-2)
    with pytest.raises(ValueError, match="empty"):
        HDPTopics(n_components=2).fit(np.zeros((4, V)))


def test_score_and_perplexity(fitted):
    est, x, _ = fitted
    test, _ = three_topic_docs(30, seed=7)
    scores = est.score_samples(test)
    assert scores.shape == (30,) and np.all(scores < 0)
    assert np.isclose(est.score(test), scores.sum())
    assert np.isclose(est.perplexity(test), np.exp(-scores.sum() / test.sum()))
    # documents mixing words of all three topics fit the topics worse than single-topic ones
    mixed = np.roll(test, 5, axis=1)
    assert est.perplexity(mixed) > est.perplexity(test)
    assert 1 < est.perplexity(test) < V


@pytest.mark.parametrize("method", ["fit", "transform", "score", "score_samples", "perplexity"])
def test_negative_counts_raise_naming_the_method_called(fitted, method):
    """score, score_samples and perplexity said 'Negative values in data passed to HDPTopics.transform'."""
    est, x, _ = fitted
    bad = x.astype(float)
    bad[3, 4] = -1.0
    with pytest.raises(ValueError, match=f"Negative values in data passed to HDPTopics.{method}"):
        getattr(clone(est) if method == "fit" else est, method)(bad)


@pytest.mark.parametrize("method", ["fit", "transform", "score"])
def test_counts_whose_total_overflows_raise_instead_of_nan(fitted, method):
    est, x, _ = fitted
    with pytest.raises(ValueError, match="sum past float64's largest number"):
        getattr(clone(est) if method == "fit" else est, method)(x * 1e307)


def test_huge_counts_whose_total_is_finite_still_fit(fitted):
    est, x, _ = fitted
    assert np.isfinite(est.transform(x[:3] * 1e300)).all()


def test_wrong_vocabulary_size_at_transform(fitted):
    est, _, _ = fitted
    with pytest.raises(ValueError, match="features"):
        est.transform(np.ones((4, V + 1)))


def test_get_set_params_round_trip_and_clone():
    est = HDPTopics(n_components=4, alpha=0.3, gamma=5.0, lam0=0.2, n_batches=3, moves="merge", max_iter=7,
                    tol=1e-4, random_state=3)
    params = est.get_params()
    assert params["n_components"] == 4 and params["lam0"] == 0.2 and params["moves"] == "merge"
    other = HDPTopics().set_params(**params)
    assert other.get_params() == params
    copy = clone(est)
    assert copy is not est and copy.get_params() == params
    x, _ = three_topic_docs(45)
    assert np.array_equal(clone(est).fit(x).transform(x), clone(est).fit(x).transform(x))


def test_pickle_round_trip_reproduces_transform(fitted):
    est, x, _ = fitted
    back = pickle.loads(pickle.dumps(est))
    assert np.array_equal(back.transform(x), est.transform(x))
    assert np.array_equal(back.components_, est.components_) and back.score(x) == est.score(x)


@pytest.mark.parametrize("name,value", [("n_components", 0), ("n_components", 2.5), ("alpha", 0.0),
                                        ("gamma", -1.0), ("lam0", -0.1), ("max_iter", 0), ("tol", -1.0),
                                        ("n_batches", 0), ("moves", "split"), ("moves", ["birth"]),
                                        ("move_options", [("birth", {})]), ("move_options", {"birth": {"num_new": 4}}),
                                        ("random_state", -1), ("random_state", 2**32), ("random_state", 1.5)])
def test_bad_params_raise_at_fit_naming_the_parameter(name, value):
    est = HDPTopics(**{name: value})  # __init__ only stores
    assert est.get_params()[name] == value
    with pytest.raises(ValueError, match=name):
        est.fit(three_topic_docs(12)[0])


def test_a_numpy_generator_seeds_the_fit_as_a_random_state_does():
    x, _ = three_topic_docs(45)
    est = HDPTopics(n_components=3, max_iter=3, random_state=np.random.default_rng(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a, b = clone(est).fit(x), clone(est).fit(x)
        rng = np.random.default_rng(2)
        c, d = clone(est).set_params(random_state=rng).fit(x), clone(est).set_params(random_state=rng).fit(x)
    assert np.array_equal(a.components_, b.components_) and np.array_equal(a.components_, c.components_)
    assert not np.array_equal(c.components_, d.components_)


def test_counts_too_large_for_the_bound_are_refused_naming_the_estimator():
    """Counts too large for the bound (1e303 in float64) failed with "the objective became NaN"; the estimator
    refuses them as MemoizedHDP does, naming itself (as for a corpus with no tokens), and keeps no fit."""
    est = HDPTopics(n_components=3, max_iter=2)
    with pytest.raises(ValueError, match=r"^HDPTopics\.fit: the corpus's .* tokens .* are too many for float64"):
        est.fit(three_topic_docs(12)[0] * 1e303)
    assert not hasattr(est, "components_")


def test_an_unconverged_fit_warns_under_both_warning_classes():
    from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

    import pyro_memo as pm

    with pytest.warns(pm.ConvergenceWarning, match="max_iter=1") as record:
        est = HDPTopics(n_components=3, max_iter=1, random_state=0).fit(three_topic_docs(30)[0])
    assert not est.converged_ and issubclass(record[0].category, SklearnConvergenceWarning)


def test_feature_names_out_name_the_topics_for_pipelines_and_column_transformers(fitted):
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    est, x, _ = fitted
    names = [f"hdptopics{k}" for k in range(est.n_components_)]
    assert list(est.get_feature_names_out()) == names
    pipeline = make_pipeline(FunctionTransformer(feature_names_out="one-to-one"), clone(est)).fit(x)
    assert list(pipeline.get_feature_names_out()) == names
    columns = ColumnTransformer([("t", clone(est), list(range(V)))]).fit(x)
    assert list(columns.get_feature_names_out()) == [f"t__{name}" for name in names]


def test_the_callers_sparse_matrix_is_left_as_it_was():
    # duplicate entries, an explicit zero and unsorted indices: a canonicalising copy must not write back
    values, columns, pointers = np.array([1.0, 2.0, 0.0, 3.0]), np.array([2, 2, 0, 3]), np.array([0, 3, 4])
    x = sp.csr_matrix((values, columns, pointers), shape=(2, 5))
    before = (values.copy(), columns.copy(), pointers.copy())
    est = HDPTopics(n_components=2, max_iter=200, tol=1e-3, random_state=0).fit(x)
    est.transform(x)
    est.score(x)
    assert all(np.array_equal(a, b) for a, b in zip((values, columns, pointers), before, strict=True))
    assert x.nnz == 4


@pytest.mark.parametrize("exception", [KeyboardInterrupt, ValueError])
def test_an_interrupted_fit_leaves_the_estimator_unfitted_or_its_previous_fit_whole(monkeypatch, exception):
    """Ctrl-C (or an error) mid-fit: a first fit leaves the estimator unfitted (not n_features_in_ with no
    posterior_); a refit on a wider vocabulary leaves the earlier fit reading out at its own width."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    from pyro_memo import topic_estimator

    X, _ = three_topic_docs(30)
    real_fit = topic_estimator.MemoizedHDP.fit

    def stop(*args, **kwargs):
        raise exception("stopped")

    monkeypatch.setattr(topic_estimator.MemoizedHDP, "fit", stop)
    est = HDPTopics(n_components=3, max_iter=3, random_state=0)
    with pytest.raises(exception):
        est.fit(X)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    with pytest.raises(NotFittedError):
        est.transform(X)
    monkeypatch.setattr(topic_estimator.MemoizedHDP, "fit", real_fit)
    est.fit(X)
    before, proportions = dict(vars(est)), est.transform(X)
    monkeypatch.setattr(topic_estimator.MemoizedHDP, "fit", stop)
    wider = np.hstack([X, X[:, :5]])
    with pytest.raises(exception):
        est.fit(wider)
    assert vars(est).keys() == before.keys() and all(vars(est)[k] is v for k, v in before.items())
    assert est.n_features_in_ == V and np.array_equal(est.transform(X), proportions)
    with pytest.raises(ValueError, match=f"{V + 5} features"):
        est.transform(wider)
