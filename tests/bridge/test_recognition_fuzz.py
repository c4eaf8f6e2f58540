"""Fuzz: generated model variants (names, plates, argument conventions, dtypes, scalar / vector data,
features as an event or as nested plates, hyperparameters as constants / pyro.param / latents,
deterministic sites, wrong distributions, missing sticks). Whatever the variant, ``recognize_model``
and ``fit_vb`` either work or raise a ModelStructureError / ValueError: no raw torch or Pyro error
escapes."""

import contextlib
import random
import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
import torch.nn.functional as F

import pyro_memo as pm

NUM_VARIANTS = 60
N, T = 12, 4


def mix_weights(beta):
    beta1m_cumprod = (1 - beta).cumprod(-1)
    return F.pad(beta, (0, 1), value=1) * F.pad(beta1m_cumprod, (1, 0), value=1)


def variant(rng):
    """A random model, its call arguments and a description."""
    v = {
        "family": rng.choice(["normal", "poisson", "bernoulli", "studentt", "lognormal_prior"]),
        "scalar": rng.random() < 0.5,
        "dtype": rng.choice([torch.float32, torch.float64]),
        "names": {k: f"{k}_{rng.randrange(100)}" for k in ("stick", "a", "b", "z", "obs", "det")},
        "plates": {k: rng.choice([f"{k}s", f"{k}_plate", f"P{rng.randrange(10)}"]) for k in ("stick", "comp", "data")},
        "subsample": rng.random() < 0.3,
        "keyword": rng.random() < 0.5,
        "alpha": rng.choice(["const"] * 6 + ["param", "latent", "latent_lognormal"]),
        "hyper": rng.choice(["const"] * 5 + ["param"]),
        "deterministic": rng.random() < 0.4,
        "sticks": rng.choice(["beta", "beta", "beta", "missing", "wrong"]),
        # features as nested plates (dim=-1), the data and component plates at dim=-2
        "nested": rng.random() < 0.4,
    }
    v["plates"] = {k: f"{name}{i}" for i, (k, name) in enumerate(v["plates"].items())}  # distinct
    D = 1 if v["scalar"] else 2
    dt = v["dtype"]
    nm, pl = v["names"], v["plates"]

    def c(value, shape=()):
        return torch.full(shape, float(value), dtype=dt)

    def model(data=None, idx=None):
        if v["alpha"] == "param":
            alpha = pyro.param("alpha", c(1.0))
        elif v["alpha"] == "latent":
            alpha = pyro.sample("alpha", dist.Gamma(c(1.0), c(1.0)))  # accepted: q(alpha) is learnt
        elif v["alpha"] == "latent_lognormal":
            alpha = pyro.sample("alpha", dist.LogNormal(c(0.0), c(1.0)))
        else:
            alpha = c(1.0)
        hyper = pyro.param("hyper", c(2.0)) if v["hyper"] == "param" else c(2.0)
        if v["sticks"] == "beta":
            with pyro.plate(pl["stick"], T - 1):
                beta = pyro.sample(nm["stick"], dist.Beta(c(1.0), alpha))
            weights = mix_weights(beta)
        elif v["sticks"] == "wrong":
            with pyro.plate(pl["stick"], T - 1):
                beta = pyro.sample(nm["stick"], dist.Beta(c(2.0), alpha))
            weights = mix_weights(beta)
        else:
            weights = c(1.0 / T, (T,))
        if v["deterministic"]:
            weights = pyro.deterministic(nm["det"], weights)
        nested = v["nested"] and not v["scalar"]
        shape = () if v["scalar"] or nested else (D,)
        ev = 0 if v["scalar"] or nested else 1
        features = pyro.plate(f"{pl['data']}_features", D, dim=-1) if nested else contextlib.nullcontext()
        with features, pyro.plate(pl["comp"], T, dim=-2 if nested else None):
            fam = v["family"]
            if fam in ("normal", "studentt", "lognormal_prior"):
                prior = dist.LogNormal(c(0.0, shape), c(1.0)) if fam == "lognormal_prior" else \
                    dist.Gamma(c(2.0, shape), hyper)
                lam = pyro.sample(nm["a"], prior.to_event(ev))
                mu = pyro.sample(nm["b"], dist.Normal(c(0.0, shape), (0.1 * lam).rsqrt()).to_event(ev))
            elif fam == "poisson":
                lam = pyro.sample(nm["a"], dist.Gamma(c(3.0, shape), hyper * 0.05).to_event(ev))
            else:
                lam = pyro.sample(nm["a"], dist.Beta(c(2.0, shape), hyper).to_event(ev))
        dim = -2 if nested else None
        plate = pyro.plate(pl["data"], N, subsample=idx, dim=dim) if v["subsample"] else \
            pyro.plate(pl["data"], N, dim=dim)
        with plate as i:
            x = data[i] if v["subsample"] else data
            z = pyro.sample(nm["z"], dist.Categorical(weights))
            z = z.squeeze(-1) if nested else z
            if fam in ("normal", "lognormal_prior"):
                like = dist.Normal(mu[z], lam[z].rsqrt())
            elif fam == "studentt":
                like = dist.StudentT(c(3.0), mu[z], lam[z].rsqrt())
            elif fam == "poisson":
                like = dist.Poisson(lam[z])
            else:
                like = dist.Bernoulli(lam[z])
            with features:
                pyro.sample(nm["obs"], like.to_event(ev), obs=x)

    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    shape = (N,) if v["scalar"] else (N, D)
    if v["family"] == "poisson":
        data = torch.poisson(torch.full(shape, 4.0), generator=g)
    elif v["family"] == "bernoulli":
        data = torch.bernoulli(torch.full(shape, 0.4), generator=g)
    else:
        data = torch.randn(shape, generator=g)
    data = data.to(dt)
    args, kwargs = ((), {"data": data}) if v["keyword"] else ((data,), {})
    if v["subsample"]:
        kwargs["idx"] = torch.randperm(N, generator=g)[: N // 2]
    return model, args, kwargs, v


def test_no_raw_error_escapes_recognition_or_fit():
    rng = random.Random(20261124)
    outcomes = {"accepted": 0, "refused": 0}
    for k in range(NUM_VARIANTS):
        model, args, kwargs, v = variant(rng)
        pyro.clear_param_store()
        pyro.set_rng_seed(k)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", pm.ConvergenceWarning)
                pm.recognize_model(model, *args, **kwargs)
                result = pm.fit_vb(model, *args, max_iter=3, **kwargs)
            assert result.elbo == result.elbo, v  # not NaN
            outcomes["accepted"] += 1
            nested = v["nested"] and not v["scalar"]
            outcomes["nested accepted"] = outcomes.get("nested accepted", 0) + nested
        except ValueError as err:  # ModelStructureError is a ValueError
            assert str(err), v
            outcomes["refused"] += 1
        except Exception as err:  # noqa: BLE001 -- the point of the test
            pytest.fail(f"variant {k} {v} raised {type(err).__name__}: {err}")
    # the generator covers both sides, with features as nested plates too
    assert outcomes["accepted"] >= 5 and outcomes["refused"] >= 5, outcomes
    assert outcomes["nested accepted"] >= 3, outcomes


def test_refusals_are_model_structure_errors_naming_a_site():
    """Refused variants with a pyro.param or a latent alpha of another prior than a Gamma say which site it is."""
    rng = random.Random(7)
    seen = 0
    for _ in range(NUM_VARIANTS):
        model, args, kwargs, v = variant(rng)
        if not (v["alpha"] == "param" or v["alpha"] == "latent_lognormal" and v["sticks"] == "beta"):
            continue
        pyro.clear_param_store()
        with pytest.raises(pm.ModelStructureError, match=r"site 'alpha'|site 'hyper'"):
            pm.recognize_model(model, *args, **kwargs)
        seen += 1
    assert seen >= 10
