"""The comparison harness and the baselines refuse settings they cannot honour with one ValueError, before
any run: budgets, seeds and method lists, shared settings, held-out splits, SGA and Gibbs parameters."""

import numpy as np
import pytest

import pyro_memo as pm
from pyro_memo.comparison import Budget, RelationalSettings, Settings, TopicSettings, compare, load_array_split
from pyro_memo.inference import BlockedGibbs, CollapsedGibbs
from pyro_memo.inference.sga import SGA

X = np.random.default_rng(0).normal(size=(60, 2))


@pytest.mark.parametrize("kwargs,match", [
    (dict(passes=0), "Budget passes must be a positive finite number; got 0"),
    (dict(passes=-1), "got -1"), (dict(passes=float("nan")), "got nan"),
    (dict(passes=2, seconds=-1), "Budget seconds must be a positive finite number; got -1"),
])
def test_a_budget_that_no_run_can_spend_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Budget(**kwargs)


@pytest.mark.parametrize("cls", [Settings, TopicSettings, RelationalSettings])
@pytest.mark.parametrize("kwargs,match", [(dict(K=0), "K must be a positive integer"),
                                          (dict(batches=0), "batches must be a positive integer; got 0"),
                                          (dict(alpha=float("inf")), "alpha must be a positive finite number")])
def test_every_tasks_shared_settings_are_checked(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


@pytest.mark.parametrize("kwargs,match", [(dict(eps=2.0), r"eps must lie in \(0, 1\); got 2.0"),
                                          (dict(eps=0.0), "eps must lie in"),
                                          (dict(gamma=-1.0), "gamma must be positive and finite; got -1.0"),
                                          (dict(learn_eps="no"), "learn_eps must be True or False; got 'no'"),
                                          (dict(alpha_prior=(0, 1)), r"alpha_prior \(shape, rate\) must be two"),
                                          (dict(dtype="float16"), "dtype must be one of")])
def test_relational_settings_are_checked_before_any_run(kwargs, match):
    """RelationalSettings(eps=2.0), gamma=-1 or alpha_prior=(0, 1) failed only when memo or svi-hdp started,
    after louvain and svi-ammsb listed before them had run (on a large graph, hours); learn_eps="no" made the
    memoized methods learn eps, as bool("no") is True. Each is now refused when the settings are made."""
    with pytest.raises(ValueError, match=match):
        RelationalSettings(**kwargs)
    assert RelationalSettings(learn_eps=True, alpha_prior=(1, 1), dtype="float32").eps == 1e-4


@pytest.mark.parametrize("methods,seeds,match", [
    (["memo"], [], "give at least one seed"), (["memo"], [0, 0], "a seed is listed twice"),
    (["memo"], [-1], r"seeds must be whole numbers in \[0, 2\*\*32\); got -1"), (["memo"], ["1"], "got '1'"),
    (["memo", "memo"], [0], "a method is listed twice"), ("memo", [0], "the string 'memo'"),
    # TypeErrors before: 'NoneType' / 'int' object is not iterable, unhashable type: 'list'
    (["memo"], None, r"seeds must be a list of whole numbers; got None"), (["memo"], 3, r"got 3 \(e.g. \[3\]\)"),
    (None, [0], "methods must be a list of names; got None"), (3, [0], "methods must be a list of names; got 3"),
    ([["memo"]], [0], r"unknown methods \[\['memo'\]\]"),
])
def test_seeds_and_methods_are_checked_before_any_run(tmp_path, methods, seeds, match):
    with pytest.raises(ValueError, match=match):
        compare(X, methods, seeds, budget=Budget(passes=1), settings=Settings(K=3, batches=2), out_dir=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing ran, nothing was written


@pytest.mark.parametrize("kwargs,match", [
    (dict(family=3), "family must be a family name or a ConjugateFamily; got int"),
    (dict(budget=3), "budget must be a Budget; got int"), (dict(settings=3), "settings must be a Settings; got int"),
    (dict(progress=3), r"progress must be a callable progress\(message\) or None; got int"),
])
def test_a_family_budget_settings_or_progress_of_the_wrong_kind_is_refused_before_any_run(tmp_path, kwargs, match):
    """Used to fail with an AttributeError inside the first run ('int' object has no attribute 'passes'), or
    (progress) with "'int' object is not callable" only after the first run."""
    with pytest.raises(TypeError, match=match):
        compare(X, ["memo"], [0], **{"budget": Budget(passes=1), "settings": Settings(K=3, batches=2), **kwargs},
                out_dir=tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("kwargs,match", [
    (dict(heldout_fraction="0.2"), r"held-out fraction must be a number in \[0, 1\); got '0.2'"),
    (dict(heldout_fraction=True), "got True"), (dict(heldout_fraction=float("nan")), "got nan"),
    (dict(seed=-1), "seed must be a whole number .*; got -1"), (dict(seed=0.5), "got 0.5"),
])
def test_a_held_out_split_refuses_a_non_numeric_fraction_and_a_bad_seed(kwargs, match):
    """Used to fail with a raw TypeError ('<=' not supported) or numpy's "expected non-negative integer"."""
    with pytest.raises(ValueError, match=match):
        load_array_split(X, None, **kwargs)


def test_a_held_out_split_must_leave_training_rows_and_labels_must_match():
    with pytest.raises(ValueError, match="leaves none to train on"):
        load_array_split(X, None, 0.999)
    with pytest.raises(ValueError, match="labels has 10 entries for the 60 rows"):
        load_array_split(X, np.zeros(10), 0.2)


@pytest.mark.parametrize("kwargs,match", [
    (dict(step=float("inf")), "step must be a positive finite number"),
    (dict(prior_strength=0), "prior_strength must be a positive finite number"),
    (dict(threshold=2), r"threshold .* must lie in \[0, 1\)"), (dict(threshold=float("nan")), "threshold"),
    (dict(alpha=float("inf")), "alpha must be a positive finite number"), (dict(K=2.5), "K must be a positive"),
])
def test_sga_refuses_settings_that_give_nan_means_or_prune_everything(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SGA(**kwargs)


@pytest.mark.parametrize("sampler", [BlockedGibbs, CollapsedGibbs])
def test_gibbs_samplers_refuse_an_infinite_alpha(sampler):
    with pytest.raises(ValueError, match="alpha must be a positive finite number; got inf"):
        sampler(pm.Gaussian.from_data(X), alpha=float("inf"))


def test_stochastic_vb_refuses_zero_initial_items():
    with pytest.raises(ValueError, match="init_items must be a positive integer; got 0"):
        pm.StochasticVB(pm.Gaussian.from_data(X), 3, init_items=0)


@pytest.mark.parametrize("labels,match", [
    # NaN, 2-D or string labels failed only when the first run was scored, as "truth must ...";
    # one number was TypeError: object of type 'int' has no len()
    (np.r_[np.zeros(59), np.nan], "labels must hold integer labels"),
    (np.zeros((60, 1)), r"labels must be a 1-D array of labels; got shape \(60, 1\)"),
    (["a"] * 60, "labels must hold integer labels; got dtype <U1"), (3, "labels must be a 1-D array"),
])
def test_labels_are_checked_before_any_run(tmp_path, labels, match):
    with pytest.raises(ValueError, match=match):
        compare(X, ["memo"], [0], labels=labels, budget=Budget(passes=1), settings=Settings(K=3, batches=2),
                out_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_more_batches_than_items_documents_or_nodes_are_refused_before_any_run(tmp_path, monkeypatch):
    """Settings(batches=20) on 15 items ran vb and collapsed Gibbs (2 s), then memo failed with "the number of
    batches must be between 1 and N = 15"; the topic and relational tasks likewise after their first methods."""
    from pyro_memo.comparison import METHODS, RELATIONAL_METHODS, TOPIC_METHODS, compare_relational, compare_topics
    from pyro_memo.data.graphs import assortative_graph
    from pyro_memo.synthetic import bars_corpus
    from pyro_memo.topics import split_documents

    for registry, method in ((METHODS, "vb"), (TOPIC_METHODS, "memo"), (RELATIONAL_METHODS, "louvain")):
        monkeypatch.setitem(registry, method, lambda *args: pytest.fail("a run started"))
    with pytest.raises(ValueError, match=r"settings.batches = 20 exceeds the number of items \(15\)"):
        compare(X[:15], ["vb", "memo"], [0], budget=Budget(passes=1), out_dir=tmp_path)
    assert not any(tmp_path.iterdir())
    train, test = split_documents(bars_corpus(20, 40, seed=5)[0], 0.2, seed=0)
    with pytest.raises(ValueError, match=r"settings.batches = 50 exceeds the number of training documents \(16\)"):
        compare_topics(train, test, ["memo"], settings=TopicSettings(K=5, batches=50))
    with pytest.raises(ValueError, match=r"settings.batches = 50 exceeds the number of nodes \(20\)"):
        compare_relational(assortative_graph(20, 2, seed=0)[0], ["louvain", "memo"],
                           settings=RelationalSettings(K=2, batches=50))
