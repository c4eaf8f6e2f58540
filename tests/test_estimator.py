"""The scikit-learn estimator DPMixture: sklearn's own conventions, clustering and densities."""

import re
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.utils.estimator_checks import check_estimator

import pyro_memo as pm
from pyro_memo import DPMixture

CENTERS = np.array([[0.0, 0.0], [15.0, 0.0], [0.0, 15.0]])


def blobs(n=300, seed=0):
    """Three unit-variance Gaussian blobs 15 apart, and their labels."""
    return make_blobs(n_samples=n, centers=CENTERS, cluster_std=1.0, random_state=seed)


@pytest.mark.parametrize("params", [dict(), dict(algorithm="vb"), dict(moves="birth,merge,delete"),
                                    dict(family="diag-gauss", dtype="float32")])
@pytest.mark.slow
def test_check_estimator_passes(params):
    results = check_estimator(DPMixture(n_components=3, max_iter=5, **params), on_fail=None, on_skip=None)
    failed = [(r["check_name"], repr(r["exception"])) for r in results if r["status"] == "failed"]
    assert len(results) > 30 and not failed


@pytest.mark.parametrize("algorithm", ["memo", "vb"])
def test_separated_blobs_are_recovered(algorithm):
    x, truth = blobs()
    est = DPMixture(n_components=10, algorithm=algorithm, max_iter=100, random_state=0).fit(x)
    assert adjusted_rand_score(truth, est.labels_) > 0.95
    assert np.array_equal(est.predict(x), est.labels_)
    assert np.array_equal(est.fit_predict(x), est.labels_)
    assert est.n_iter_ >= 1 and np.isfinite(est.elbo_) and est.n_features_in_ == 2
    assert np.isclose(est.elbo_, float(est.posterior_.elbo(est.summary_)))


def test_labels_number_components_by_training_size():
    x, _ = blobs()
    est = DPMixture(n_components=8, random_state=1).fit(x)
    used = np.unique(est.labels_)
    assert np.array_equal(used, np.arange(len(used)))
    sizes = np.bincount(est.labels_)
    assert np.all(np.diff(sizes) <= 0)
    assert np.allclose(est.weights_, est.posterior_.expected_weights().numpy()[est.component_of_label_])


def test_predict_proba_rows_sum_to_one_and_match_predict():
    x, _ = blobs()
    est = DPMixture(n_components=6, random_state=0).fit(x)
    proba = est.predict_proba(x[:50] + 0.5)
    assert proba.shape == (50, est.posterior_.K)
    assert np.allclose(proba.sum(1), 1.0)
    assert np.array_equal(proba.argmax(1), est.predict(x[:50] + 0.5))


def test_score_samples_higher_near_the_data_than_far_away():
    x, _ = blobs()
    est = DPMixture(n_components=6, random_state=0).fit(x)
    near, _ = blobs(60, seed=1)
    far = near + 200.0
    assert est.score_samples(near).min() > est.score_samples(far).max()
    assert np.isclose(est.score(near), est.score_samples(near).mean())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_float32_and_float64_inputs_agree(dtype):
    x, _ = blobs()
    est = DPMixture(n_components=5, random_state=0, dtype=dtype).fit(x.astype(np.float32))
    test, _ = blobs(80, seed=2)
    assert np.array_equal(est.predict(test.astype(np.float32)), est.predict(test))
    assert np.allclose(est.score_samples(test.astype(np.float32)), est.score_samples(test), rtol=1e-5)
    assert np.allclose(est.predict_proba(test.astype(np.float32)), est.predict_proba(test), atol=1e-6)
    assert np.array_equal(est.predict(np.rint(test).astype(np.int64)), est.predict(np.rint(test)))


def test_fit_on_float32_and_float64_copies_gives_the_same_labels():
    x, _ = blobs()
    a = DPMixture(n_components=5, random_state=0).fit(x)
    b = DPMixture(n_components=5, random_state=0).fit(x.astype(np.float32))
    assert adjusted_rand_score(a.labels_, b.labels_) == 1.0


def test_moves_grow_one_component_into_the_three_blobs():
    x, truth = blobs()
    est = DPMixture(n_components=1, moves="birth,merge,delete", max_iter=30, random_state=0).fit(x)
    assert len(np.unique(est.labels_)) == 3
    assert adjusted_rand_score(truth, est.labels_) > 0.95


def test_family_object_keeps_its_prior():
    x, truth = blobs()
    family = pm.get_family("diag-gauss").from_data(x)
    est = DPMixture(n_components=6, family=family, random_state=0).fit(x)
    assert est.posterior_.family.name == "diag-gauss"
    assert all(np.allclose(est.posterior_.family.prior[k], v) for k, v in family.prior.items())
    assert adjusted_rand_score(truth, est.labels_) > 0.95


def test_get_set_params_round_trip_and_clone():
    est = DPMixture(n_components=4, family="diag-gauss", alpha=2.0, algorithm="vb", moves=None, random_state=3)
    params = est.get_params()
    assert params["n_components"] == 4 and params["family"] == "diag-gauss" and params["alpha"] == 2.0
    other = DPMixture().set_params(**params)
    assert other.get_params() == params
    copy = clone(est)
    assert copy is not est and copy.get_params() == params
    x, _ = blobs(90)
    assert np.array_equal(clone(est).fit(x).labels_, clone(est).fit(x).labels_)


@pytest.mark.parametrize("algorithm", ["memo", "vb"])
def test_a_numpy_generator_seeds_the_fit_as_a_random_state_does(algorithm):
    """random_state=np.random.default_rng(s): the fit is repeatable from the generator's state, and the generator
    advances (numpy's "cannot be used to seed a numpy.random.RandomState instance" before)."""
    x, _ = blobs(90)
    est = DPMixture(n_components=4, algorithm=algorithm, max_iter=5, random_state=np.random.default_rng(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pm.ConvergenceWarning)
        a, b = clone(est).fit(x), clone(est).fit(x)
        rng = np.random.default_rng(1)
        c, d = clone(est).set_params(random_state=rng).fit(x), clone(est).set_params(random_state=rng).fit(x)
    assert np.array_equal(a.predict_proba(x), b.predict_proba(x)) and np.array_equal(a.predict_proba(x),
                                                                                      c.predict_proba(x))
    assert not np.array_equal(c.predict_proba(x), d.predict_proba(x))


@pytest.mark.parametrize("name,value", [("n_components", 0), ("n_components", 2.5), ("family", "cauchy"),
                                        ("algorithm", "gibbs"), ("alpha", 0.0), ("max_iter", 0), ("tol", -1.0),
                                        ("n_batches", 0), ("init", "spectral"), ("dtype", "float16"),
                                        ("moves", ["birth"]), ("prior_scale", 0.0), ("prior", "kappa=1"),
                                        ("prior", {"lam": 1.0}), ("move_options", {"birth": 4}),
                                        ("move_options", {"birth": {"targets": 4}}),
                                        ("move_options", {"birth": {"target": 4}}), ("random_state", -1),
                                        ("random_state", 2**32), ("random_state", 1.5), ("random_state", True)])
def test_bad_params_raise_at_fit_naming_the_parameter(name, value):
    est = DPMixture(**{name: value})  # __init__ only stores
    assert est.get_params()[name] == value
    with pytest.raises(ValueError, match=name):
        est.fit(blobs(30)[0])


@pytest.mark.parametrize("family", ["poisson", "bern", "mult"])
def test_prior_scale_for_a_family_without_a_spread_names_prior_scale(family):
    """prior_scale=2 for a family with no spread hyperparameter said 'the poisson family has no spread hyperparameter
    to scale', naming neither the estimator's parameter nor how to set the priors."""
    counts = (np.random.RandomState(0).poisson(3, (60, 4)) > 2) * 1.0
    with pytest.raises(ValueError, match=r"prior_scale=2\.0: the .* family has no spread .*set its priors .* prior="):
        DPMixture(family=family, n_components=3, max_iter=3, prior_scale=2.0).fit(counts)
    assert DPMixture(family=family, n_components=3, max_iter=50, tol=1e-3, prior_scale=1.0, random_state=0).fit(
        counts).converged_


@pytest.mark.parametrize("family", ["gauss", "zm-gauss"])
def test_one_number_for_a_matrix_prior_names_the_estimators_parameters(family):
    """DPMixture(prior={"B": 2.0}) said "scale it with the prior scale (--prior-scale)", the CLI's option, which
    the Python API has not; it names the prior key and prior_scale= now."""
    with pytest.raises(ValueError, match=r"prior=\{'B': \.\.\.\}: .*'B' is a matrix.*prior_scale=") as err:
        DPMixture(family=family, n_components=3, max_iter=3, prior={"B": 2.0}).fit(blobs(30)[0])
    assert "--prior-scale" not in str(err.value)


def test_move_options_configure_the_moves():
    """move_options reach the moves: births capped at one component grow nothing; an option a move lacks, or one
    for a move not listed, is refused naming it."""
    x = blobs(300)[0]
    est = DPMixture(n_components=1, moves="birth,merge", max_iter=6, random_state=0)
    assert est.fit(x).n_components_ > 1
    assert clone(est).set_params(move_options={"birth": {"max_K": 1}}).fit(x).n_components_ == 1
    with pytest.raises(ValueError, match="move_options: the birth move has no option num_new"):
        clone(est).set_params(move_options={"birth": {"num_new": 3}}).fit(x)
    with pytest.raises(ValueError, match="move_options: options for the delete move, which the moves do not name"):
        clone(est).set_params(move_options={"delete": {}}).fit(x)


def test_moves_need_memoized_vb():
    with pytest.raises(ValueError, match="moves"):
        DPMixture(algorithm="vb", moves="merge").fit(blobs(30)[0])


@pytest.mark.parametrize("bad", [np.array([[1.0, np.nan], [0.0, 1.0]]), np.ones(5), np.empty((0, 2))])
def test_bad_data_get_sklearn_errors(bad):
    with pytest.raises(ValueError):
        DPMixture(n_components=2).fit(bad)


def test_wrong_number_of_features_at_predict():
    est = DPMixture(n_components=3, random_state=0).fit(blobs(60)[0])
    with pytest.raises(ValueError, match="features"):
        est.predict(np.ones((4, 3)))


@pytest.mark.parametrize("family,train,bad,match", [
    ("poisson", np.random.RandomState(0).poisson(3, (100, 4)), -np.ones((1, 4)), "non-negative"),
    ("poisson", np.random.RandomState(0).poisson(3, (100, 4)), np.full((1, 4), 0.5), "integer"),
    ("bern", np.random.RandomState(0).rand(100, 4) < 0.3, np.full((1, 4), 7.0), "binary"),
])
@pytest.mark.parametrize("method", ["predict", "predict_proba", "score_samples"])
def test_every_read_out_checks_the_familys_support(family, train, bad, match, method):
    est = DPMixture(family=family, n_components=4, max_iter=5, random_state=0).fit(train.astype(float))
    with pytest.raises(ValueError, match=match):
        getattr(est, method)(bad)


@pytest.mark.parametrize("dtype,value", [("float32", 1e20), ("float64", 1e160)])
@pytest.mark.parametrize("method", ["predict", "predict_proba", "score_samples"])
def test_values_whose_squares_overflow_are_refused_not_turned_into_nan(dtype, value, method):
    est = DPMixture(n_components=4, max_iter=5, random_state=0, dtype=dtype).fit(blobs(60)[0])
    with pytest.raises(ValueError, match=re.escape(f"values up to {value:.3g} in magnitude") + f".* overflow {dtype}"):
        getattr(est, method)([[value, value]])


def test_training_data_whose_squares_overflow_are_refused_before_the_default_prior():
    with pytest.raises(ValueError, match="rescale the data"):
        DPMixture(n_components=3, max_iter=3).fit(blobs(60)[0] * 1e200)


def test_prior_settings_reach_the_family_and_change_the_fit():
    x, _ = blobs(120)
    est = DPMixture(n_components=4, algorithm="vb", max_iter=5, random_state=0,
                    prior={"kappa": 0.5, "nu": 7.0}, prior_scale=3.0).fit(x)
    default = pm.Gaussian.from_data(np.asarray(x, dtype=np.float64))
    prior = est.posterior_.family.prior
    assert float(prior["kappa"]) == 0.5 and float(prior["nu"]) == 7.0
    assert np.allclose(prior["B"].numpy(), 3.0 * default.prior["B"].numpy(), rtol=1e-12, atol=0)
    assert est.elbo_ != pytest.approx(DPMixture(n_components=4, algorithm="vb", max_iter=5, random_state=0)
                                      .fit(x).elbo_, rel=1e-6)


def test_a_pickled_estimator_predicts_exactly_as_the_original():
    import pickle

    x, _ = blobs(150)
    est = DPMixture(n_components=5, max_iter=10, random_state=0).fit(x)
    copy = pickle.loads(pickle.dumps(est))
    new = blobs(40, seed=3)[0]
    assert np.array_equal(copy.predict(new), est.predict(new))
    assert np.array_equal(copy.score_samples(new), est.score_samples(new))
    assert np.array_equal(copy.predict_proba(new), est.predict_proba(new))


def test_the_estimators_model_file_predicts_as_the_estimator(tmp_path):
    x, _ = blobs(150)
    est = DPMixture(n_components=5, max_iter=10, random_state=0).fit(x)
    pm.save_model(tmp_path / "model.pt", (est.posterior_, est.summary_))
    saved = pm.load_model(tmp_path / "model.pt")
    new = blobs(40, seed=3)[0]
    assert np.array_equal(np.asarray(saved.score_samples(new)), est.score_samples(new))
    assert np.array_equal(est.component_of_label_[est.predict(new)], np.asarray(saved.predict(new)))


def test_an_unconverged_fit_warns_under_both_warning_classes_and_a_converged_one_does_not():
    from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

    x, _ = blobs()
    with pytest.warns(pm.ConvergenceWarning, match="max_iter=2") as record:
        est = DPMixture(n_components=4, max_iter=2, random_state=0).fit(x)
    assert not est.converged_ and issubclass(record[0].category, SklearnConvergenceWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DPMixture(n_components=4, max_iter=200, tol=1e-3, random_state=0).fit(x).converged_


@pytest.mark.parametrize("family,expected", [("gauss", {"means_": (2,), "covariances_": (2, 2)}),
                                             ("diag-gauss", {"means_": (2,), "covariances_": (2, 2)}),
                                             ("poisson", {"rates_": (2,)})])
def test_fitted_attributes_name_the_components_in_label_order(family, expected):
    x, _ = blobs()
    x = np.abs(np.round(x)) if family == "poisson" else x
    est = DPMixture(n_components=1, family=family, moves="birth,merge", max_iter=20, random_state=0).fit(x)
    assert est.n_components_ == est.posterior_.K == est.predict_proba(x).shape[1] > 1
    assert est.lower_bound_ == est.elbo_
    estimates = est.posterior_.family.point_estimates(est.posterior_.component)
    for name, shape in expected.items():
        value = getattr(est, name)
        assert value.shape == (est.n_components_, *shape)
        assert np.array_equal(value, estimates[name[:-1]].numpy()[est.component_of_label_])
    if family == "gauss":  # the largest component's mean sits on one of the blobs
        assert np.min(np.linalg.norm(CENTERS - est.means_[0], axis=1)) < 0.5


def test_set_params_dtype_after_fit_changes_the_next_fit_not_the_fitted_read_outs():
    x, _ = blobs()
    est = DPMixture(n_components=4, max_iter=10, random_state=0).fit(x)
    proba, scores = est.predict_proba(x), est.score_samples(x)
    est.set_params(dtype="float32")
    assert np.array_equal(est.predict_proba(x), proba) and np.array_equal(est.score_samples(x), scores)
    est.set_params(dtype="bogus")
    assert np.array_equal(est.predict(x), proba.argmax(1))
    with pytest.raises(ValueError, match="dtype"):
        est.fit(x)


def test_an_estimator_pickled_before_fits_kept_their_dtype_still_reads_out():
    import pickle

    x, _ = blobs()
    for dtype in ("float64", "float32"):
        est = DPMixture(n_components=3, max_iter=50, tol=1e-3, random_state=0, dtype=dtype).fit(x)
        older = pickle.loads(pickle.dumps(est))
        assert np.array_equal(older.predict_proba(x), est.predict_proba(x))
        assert older.predict_proba(x).dtype == np.dtype(dtype)


def interrupt_fits(monkeypatch, where="driver", exception=KeyboardInterrupt):
    """Make the next fit raise ``exception`` (KeyboardInterrupt: Ctrl-C) in the driver, or after it while
    labelling the training items."""
    from pyro_memo import estimator

    def stop(*args, **kwargs):
        raise exception("stopped")

    if where == "driver":
        monkeypatch.setattr(estimator.MemoizedVB, "fit", stop)
        monkeypatch.setattr(estimator.FullBatchVB, "fit", stop)
    else:
        monkeypatch.setattr(estimator.DPMixture, "_labels", staticmethod(stop))


@pytest.mark.parametrize("where", ["driver", "labels"])
def test_a_first_fit_interrupted_leaves_the_estimator_unfitted(monkeypatch, where):
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    x, _ = blobs(60)
    est = DPMixture(n_components=3, max_iter=5, random_state=0)
    interrupt_fits(monkeypatch, where)
    with pytest.raises(KeyboardInterrupt):
        est.fit(x)
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    with pytest.raises(NotFittedError):
        est.predict(x)
    assert not [name for name in vars(est) if name.endswith("_")]


@pytest.mark.parametrize("where,exception", [("driver", KeyboardInterrupt), ("labels", KeyboardInterrupt),
                                             ("driver", ValueError)])
def test_a_refit_that_fails_keeps_the_previous_fit_whole(monkeypatch, where, exception):
    """Refit on data of another width, interrupted (or failing) mid-fit: the earlier fit still reads out,
    with its own width (not the new data's n_features_in_ over the old posterior)."""
    x, _ = blobs(90)
    est = DPMixture(n_components=3, max_iter=5, random_state=0).fit(x)
    before = dict(vars(est))
    labels = est.predict(x)
    interrupt_fits(monkeypatch, where, exception)
    wider = np.hstack([x, x[:, :1]])
    with pytest.raises(exception):
        est.fit(wider)
    assert vars(est).keys() == before.keys() and all(vars(est)[k] is v for k, v in before.items())
    assert est.n_features_in_ == 2 and np.array_equal(est.predict(x), labels)
    with pytest.raises(ValueError, match="3 features"):
        est.predict(wider)


def test_a_refit_drops_the_attributes_of_an_earlier_family():
    x, _ = blobs(90)
    est = DPMixture(n_components=3, max_iter=5, random_state=0).fit(x)
    assert hasattr(est, "means_")
    est.set_params(family="poisson").fit(np.abs(np.round(x)))
    assert hasattr(est, "rates_") and not hasattr(est, "means_") and not hasattr(est, "covariances_")
