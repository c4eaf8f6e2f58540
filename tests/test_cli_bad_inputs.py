"""Table-driven: every bad input or option to ``pyro-memo`` gives exit status 2 and one line
``pyro-memo: error: ...`` naming the problem, no traceback, and leaves no output file behind."""

import os
import pathlib

import numpy as np
import pytest

from pyro_memo.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Good and bad data files, and places one cannot write to (even as root)."""
    d = tmp_path_factory.mktemp("bad")
    rng = np.random.default_rng(0)
    good = rng.normal(size=(60, 2))
    np.savez(d / "good.npz", x=good)
    np.save(d / "good.npy", good)
    with_nan = good.copy()
    with_nan[3, 1] = np.nan
    np.savez(d / "nan.npz", x=with_nan)
    with_inf = good.copy()
    with_inf[0, 0] = np.inf
    np.save(d / "inf.npy", with_inf)
    np.save(d / "one_d.npy", good[:, 0])
    np.save(d / "three_d.npy", good.reshape(60, 2, 1))
    np.save(d / "empty.npy", np.zeros((0, 2)))
    np.save(d / "strings.npy", np.array([["a", "b"]] * 5))
    np.savez(d / "two_arrays.npz", a=good, b=good)
    np.savez(d / "bad_labels.npz", x=good, labels=np.zeros(7))
    np.save(d / "negative.npy", np.abs(good) * -1.0)
    np.save(d / "fractional.npy", np.abs(good))
    (d / "garbage.npy").write_bytes(b"not a numpy file at all")
    (d / "garbage.npz").write_bytes(b"PK not a zip")
    (d / "data.csv").write_text("1,2\n3,4\n")
    (d / "afile").write_text("a regular file")
    (d / "bad.ldac").write_text("2 0:1 1:x\n")
    (d / "neg.ldac").write_text("1 0:-3\n")
    (d / "ok.ldac").write_text("2 0:1 1:2\n1 1:4\n")
    (d / "vocab.txt").write_text("a\n")  # one word, the corpus uses two
    (d / "save_nostate").mkdir()
    (d / "empty.ldac").write_text("")
    (d / "one_column.txt").write_text("0\n1\n2\n")
    (d / "negative.edges").write_text("0 1\n-3 2\n")
    np.savez(d / "grouped.npz", x=good, groups=np.repeat(np.arange(6), 10))  # --model hdp --algo memory-bounded
    np.savez(d / "grouped_float.npz", x=good, groups=np.repeat(np.arange(6), 10) + 0.5)
    np.savez(d / "grouped_short.npz", x=good, groups=np.arange(7))
    np.savez(d / "grouped_nan.npz", x=with_nan, groups=np.repeat(np.arange(6), 10))
    np.savez(d / "more.npz", x=rng.normal(size=(80, 2)))  # other N than good.npz
    np.savez(d / "wide.npz", x=rng.normal(size=(60, 3)))  # other D
    _checkpoints(d)
    _damaged_files(d)
    return d


def _damaged_files(d):
    """Truncated and empty array files and corpus shards, fit folders with a directory where a fit
    file goes, a relational fit's folder (no model.pt) and one of a fit that did not finish (state.pt
    alone)."""
    from pyro_memo.data import bars_corpus, write_corpus_shards

    npz = (d / "good.npz").read_bytes()
    (d / "half.npz").write_bytes(npz[: len(npz) // 2])
    (d / "empty.npz").write_bytes(b"")
    npy = (d / "good.npy").read_bytes()
    (d / "short.npy").write_bytes(npy[:-100])
    for name, cut in (("shards_half", 0.5), ("shards_empty", 0.0)):
        shards = write_corpus_shards(bars_corpus(20, 10, side=4, seed=0)[0], d / name, num_shards=2)
        shard = d / name / shards.meta["shards"][1]
        content = shard.read_bytes()
        shard.write_bytes(content[: int(len(content) * cut)])
    for name in ("model.pt", "state.pt"):
        (d / f"save_dir_{name}" / name).mkdir(parents=True)
    (d / "ring.edges").write_text("".join(f"{i} {(i + 1) % 12}\n{i} {(i + 3) % 12}\n" for i in range(12)))
    assert main(["fit", str(d / "ring.edges"), "--model", "relational", "--K", "2", "--laps", "1",
                 "--save", str(d / "relational_state"), "--quiet"]) == 0
    (d / "unfinished_state").mkdir()
    (d / "unfinished_state" / "state.pt").write_bytes((d / "dp_state" / "state.pt").read_bytes())


def _checkpoints(d):
    """Checkpoints of both models (one lap each, on the table's own data and default options) and
    damaged ones."""
    import torch

    assert main(["fit", str(d / "good.npz"), "--algo", "memo", "--laps", "1", "--save", str(d / "dp_state"),
                 "--quiet"]) == 0
    assert main(["fit", str(d / "good.npz"), "--algo", "memo", "--laps", "1", "--alpha-prior", "1,1",
                 "--save", str(d / "dp_alpha_state"), "--quiet"]) == 0
    assert main(["fit", "bars", "--model", "hdp", "--K", "4", "--batches", "2", "--laps", "1",
                 "--save", str(d / "hdp_state"), "--quiet"]) == 0
    state = (d / "dp_state" / "state.pt").read_bytes()
    for name, content in [("truncated", state[: len(state) // 2]), ("garbage", b"\x80\x02 not a torch file"),
                          ("empty", b"")]:
        (d / f"{name}_state").mkdir()
        (d / f"{name}_state" / "state.pt").write_bytes(content)
    (d / "foreign_state").mkdir()
    torch.save({"weights": torch.ones(3)}, d / "foreign_state" / "state.pt")
    (d / "dir_state" / "state.pt").mkdir(parents=True)
    model = (d / "dp_state" / "model.pt").read_bytes()
    (d / "truncated_model.pt").write_bytes(model[: len(model) // 2])
    (d / "empty_model.pt").write_bytes(b"")
    (d / "garbage_model.pt").write_bytes(b"\x80\x02 not a torch file")
    torch.save({"weights": torch.ones(3)}, d / "foreign_model.pt")
    newer = torch.load(d / "dp_state" / "model.pt", weights_only=True)
    torch.save({**newer, "format_version": newer["format_version"] + 1}, d / "newer_model.pt")


def cases(f):
    """``(argv, keyword the error line must contain)``."""
    good, afile = str(f / "good.npz"), str(f / "afile")
    unwritable = os.path.join(afile, "sub")  # a folder under a regular file: unwritable even as root
    fit, memo, hdp, cmp, hcmp = (["fit", good], ["fit", good, "--algo", "memo"], ["fit", "bars", "--model", "hdp"],
                                 ["compare", good], ["compare", "bars", "--model", "hdp"])
    rcmp = ["compare", "synthetic", "--model", "relational"]
    return [
        # numbers out of range, fit (dp vb / dp memo / hdp)
        (fit + ["--K", "0"], "--K"), (fit + ["--K", "-1"], "--K"), (fit + ["--laps", "0"], "--laps"),
        (fit + ["--laps", "-5"], "--laps"), (fit + ["--tol", "-1"], "--tol"), (fit + ["--tol", "nan"], "--tol"),
        (fit + ["--tol", "inf"], "--tol"), (fit + ["--alpha", "0"], "--alpha"), (fit + ["--alpha", "-2"], "--alpha"),
        (fit + ["--alpha", "nan"], "--alpha"), (fit + ["--alpha", "inf"], "--alpha"),
        (fit + ["--seed", "-1"], "--seed"),
        (fit + ["--alpha-prior", "0,1"], "--alpha-prior"), (fit + ["--alpha-prior", "1,-2"], "--alpha-prior"),
        (fit + ["--alpha-prior", "nan,1"], "--alpha-prior"), (fit + ["--alpha-prior", "1,inf"], "--alpha-prior"),
        (memo + ["--alpha-prior", "0,0"], "--alpha-prior"),
        (memo + ["--batches", "0"], "--batches"), (memo + ["--batches", "-3"], "--batches"),
        (memo + ["--batches", "61"], "batches"), (memo + ["--K", "0"], "--K"), (memo + ["--tol", "-0.5"], "--tol"),
        # were "the number of batches must be between 1 and N = 60; got 61", not naming --batches
        (memo + ["--batches", "61"], "--batches 61 exceeds the number of items (60)"),
        (["fit", str(f / "good.npy"), "--algo", "memo", "--batches", "61"], "--batches 61 exceeds the number of items"),
        (hdp + ["--K", "0"], "--K"), (hdp + ["--laps", "0"], "--laps"), (hdp + ["--gamma", "0"], "--gamma"),
        (hdp + ["--gamma", "-1"], "--gamma"), (hdp + ["--lam0", "0"], "--lam0"), (hdp + ["--lam0", "nan"], "--lam0"),
        (hdp + ["--alpha", "-1"], "--alpha"), (hdp + ["--tol", "-1"], "--tol"), (hdp + ["--batches", "0"], "--batches"),
        (hdp + ["--batches", "100000"], "batches"), (hdp + ["--seed", "-3"], "--seed"),
        # not numbers at all
        (fit + ["--K", "x"], "--K"), (fit + ["--K", "2.5"], "--K"), (fit + ["--laps", "ten"], "--laps"),
        (fit + ["--tol", "small"], "--tol"), (fit + ["--alpha", ""], "--alpha"), (hdp + ["--gamma", "g"], "--gamma"),
        (cmp + ["--passes", "many"], "--passes"), (cmp + ["--seeds", "a,b"], "--seeds"),
        (fit + ["--alpha-prior", "1"], "--alpha-prior"), (fit + ["--alpha-prior", "1,2,3"], "--alpha-prior"),
        (fit + ["--alpha-prior", "a,b"], "--alpha-prior"), (fit + ["--alpha-prior", "1;2"], "--alpha-prior"),
        (fit + ["--alpha-prior", ","], "--alpha-prior"),
        # choices and option / model mismatches
        (fit + ["--family", "cauchy"], "cauchy"), (fit + ["--algo", "gibbs"], "gibbs"),
        (fit + ["--init", "magic"], "magic"), (fit + ["--dtype", "float16"], "float16"),
        (fit + ["--model", "lda"], "lda"), (fit + ["--batches", "4"], "--batches"),
        (fit + ["--moves", "birth"], "--moves"), (memo + ["--moves", "split"], "split"),
        (fit + ["--overrelax", "off"], "--overrelax"), (memo + ["--overrelax", "maybe"], "maybe"),
        (hdp + ["--overrelax", "on"], "--overrelax"),
        (hdp + ["--moves", "delete,explode"], "explode"), (hdp + ["--family", "gauss"], "--family"),
        (fit + ["--gamma", "1"], "--gamma"), (fit + ["--vocab", "v.txt"], "--vocab"),
        (hdp + ["--alpha-prior", "1,x"], "--alpha-prior"), (cmp + ["--alpha-prior", "1,1"], "--alpha-prior"),
        (hdp + ["--gamma-prior", "0,1"], "--gamma-prior"), (hdp + ["--gamma-prior", "1"], "--gamma-prior"),
        (fit + ["--gamma-prior", "1,1"], "--gamma-prior"), (fit + ["--learn-lam0"], "--learn-lam0"),
        (fit + ["--device", "tpu"], "tpu"), (fit + ["--device", "cuda:7"], "cuda"), (fit + ["--unknown"], "--unknown"),
        (fit + ["--device", "meta"], "meta is not supported"), (fit + ["--device", "mps"], "mps"),
        (hdp + ["--device", "xpu"], "xpu"),
        (["fit", good, good], "unrecognized"), (["frobnicate"], "frobnicate"), ([], "command"),
        # bad data, dp
        (["fit", str(f / "missing.npz")], "missing.npz"), (["fit", str(f / "nan.npz")], "NaN"),
        (["fit", str(f / "inf.npy")], "inf"), (["fit", str(f / "one_d.npy")], "shape"),
        (["fit", str(f / "three_d.npy")], "shape"), (["fit", str(f / "empty.npy")], "empty"),
        (["fit", str(f / "empty.npy"), "--algo", "memo"], "the data are empty (N = 0)"),
        (["fit", str(f / "strings.npy")], "strings.npy"), (["fit", str(f / "two_arrays.npz")], "two_arrays.npz"),
        (["fit", str(f / "garbage.npy")], "garbage.npy"), (["fit", str(f / "garbage.npz")], "garbage.npz"),
        (["fit", str(f / "data.csv")], "data.csv"), (["fit", afile], "afile"),
        (["fit", str(f / "negative.npy"), "--family", "mult"], "negative"),
        (["fit", str(f / "fractional.npy"), "--family", "bern"], "bern"),
        (["fit", str(f / "negative.npy"), "--family", "poisson"], "negative"),
        (["fit", "nonexistent-dataset"], "nonexistent-dataset"),
        (["fit", str(f / "garbage.npy"), "--algo", "memo"], "garbage.npy"),
        # bad data, hdp
        (["fit", "--model", "hdp"], "corpus"), (["fit", str(f / "missing.ldac"), "--model", "hdp"], "missing.ldac"),
        (["fit", str(f / "bad.ldac"), "--model", "hdp"], "bad.ldac"),
        (["fit", str(f / "neg.ldac"), "--model", "hdp"], "neg.ldac"),
        (["fit", str(f / "ok.ldac"), "--model", "hdp", "--vocab", str(f / "vocab.txt")], "vocab"),
        (["fit", str(f / "ok.ldac"), "--model", "hdp", "--vocab", str(f / "novocab.txt")], "novocab.txt"),
        (["fit", good, "--model", "hdp"], "good.npz"),
        # bad data and options, relational
        (["fit", "--model", "relational"], "graph"),
        (["fit", str(f / "missing.edges"), "--model", "relational"], "missing.edges"),
        (["fit", str(f / "one_column.txt"), "--model", "relational"], "one field"),
        (["fit", str(f / "negative.edges"), "--model", "relational"], "negative"),
        (["fit", str(f / "garbage.npz"), "--model", "relational"], "garbage.npz"),
        (["fit", "synthetic", "--model", "relational", "--heldout", "1.5"], "--heldout"),
        (["fit", "synthetic", "--model", "relational", "--heldout", "-0.1"], "--heldout"),
        (["fit", "synthetic", "--model", "relational", "--moves", "split"], "split"),
        (["fit", "synthetic", "--model", "relational", "--eps", "0"], "--eps"),
        (["fit", "synthetic", "--model", "relational", "--eps", "1"], "--eps"),
        (["fit", "synthetic", "--model", "relational", "--eps", "nan"], "--eps"),
        (["fit", "synthetic", "--model", "relational", "--batches", "501"], "batches"),
        (["fit", "synthetic", "--model", "relational", "--K", "0"], "--K"),
        (["fit", "synthetic", "--model", "relational", "--family", "gauss"], "--family"),
        (["fit", "synthetic", "--model", "relational", "--init", "kmeans"], "kmeans"),
        (["fit", "synthetic", "--model", "relational", "--resume", str(f / "hdp_state")], "--model hdp checkpoint"),
        (fit + ["--eps", "0.1"], "--eps"), (fit + ["--heldout", "0.1"], "--heldout"),
        # places that cannot be written
        (fit + ["--json", str(f)], "--json"), (fit + ["--json", os.path.join(unwritable, "out.json")], "--json"),
        (fit + ["--json", str(f / "nofolder" / "out.json")], "--json"),
        (fit + ["--save", afile], "--save"), (fit + ["--save", unwritable], "--save"),
        (memo + ["--save", unwritable], "--save"), (hdp + ["--save", unwritable], "--save"),
        (hdp + ["--save", afile], "--save"), (hdp + ["--json", os.path.join(unwritable, "o.json")], "--json"),
        (cmp + ["--out", afile], "--out"), (cmp + ["--out", unwritable], "--out"),
        (hcmp + ["--out", unwritable], "--out"),
        # resume
        (memo + ["--resume", str(f / "nowhere")], "--resume"),
        (memo + ["--resume", str(f / "save_nostate")], "state.pt"),
        (memo + ["--resume", afile], "--resume"), (fit + ["--resume", str(f / "save_nostate")], "--resume"),
        (hdp + ["--resume", str(f / "nowhere")], "--resume"),
        # compare
        (cmp + ["--methods", "memo,adam"], "adam"), (cmp + ["--methods", ""], "--methods"),
        (cmp + ["--seeds", ""], "--seeds"), (cmp + ["--passes", "0"], "--passes"),
        (cmp + ["--passes", "-1"], "--passes"),
        (cmp + ["--seconds", "0"], "--seconds"), (cmp + ["--K", "0"], "--K"), (cmp + ["--batches", "0"], "--batches"),
        (cmp + ["--heldout", "1"], "--heldout"), (cmp + ["--heldout", "-0.1"], "--heldout"),
        (cmp + ["--batches", "49"], "--batches 49 exceeds the number of training items (48)"),  # was "... N = 48"
        (cmp + ["--alpha", "0"], "--alpha"), (cmp + ["--family", "cauchy"], "cauchy"),
        (["compare", str(f / "nan.npz")], "NaN"), (hcmp + ["--methods", "memo,lda"], "lda"),
        (hcmp + ["--heldout", "0"], "--heldout"), (hcmp + ["--gamma", "0"], "--gamma"),
        (["compare", "--model", "hdp"], "corpus"),
        (rcmp + ["--methods", "memo,spectral"], "spectral"), (rcmp + ["--heldout", "0"], "--heldout"),
        (rcmp + ["--heldout", "1"], "--heldout"), (rcmp + ["--eps", "0"], "--eps"), (rcmp + ["--K", "0"], "--K"),
        (rcmp + ["--passes", "0"], "--passes"), (rcmp + ["--seeds", ""], "--seeds"),
        (rcmp + ["--batches", "501"], "batches"), (rcmp + ["--out", unwritable], "--out"),
        (rcmp + ["--gamma", "1"], "--gamma"), (["compare", "--model", "relational"], "graph"),
        (["compare", str(f / "missing.edges"), "--model", "relational"], "missing.edges"),
        # resume: damaged, foreign or other-model checkpoints
        (memo + ["--resume", str(f / "truncated_state")], "damaged"),
        (memo + ["--resume", str(f / "garbage_state")], "state.pt"),
        (memo + ["--resume", str(f / "empty_state")], "state.pt"),
        (memo + ["--resume", str(f / "foreign_state")], "not a pyro-memo checkpoint"),
        (memo + ["--resume", str(f / "dir_state")], "no state.pt"),
        (memo + ["--resume", str(f / "hdp_state")], "--model hdp checkpoint"),
        (hdp + ["--resume", str(f / "dp_state"), "--K", "4", "--batches", "2"], "--model dp checkpoint"),
        (hdp + ["--resume", str(f / "truncated_state")], "damaged"),
        (hdp + ["--resume", str(f / "save_nostate")], "state.pt"),
        (fit + ["--resume", str(f / "dp_state")], "--algo memo"),
        # resume: options or data other than the saved fit's
        (memo + ["--resume", str(f / "dp_state"), "--K", "7"], "--K"),
        (memo + ["--resume", str(f / "dp_state"), "--batches", "5"], "--batches"),
        (memo + ["--resume", str(f / "dp_state"), "--family", "diag-gauss"], "--family"),
        (memo + ["--resume", str(f / "dp_state"), "--alpha", "2"], "--alpha"),
        (memo + ["--resume", str(f / "dp_state"), "--alpha-prior", "1,1"], "--alpha-prior"),
        (memo + ["--resume", str(f / "dp_alpha_state")], "--alpha-prior"),
        (memo + ["--resume", str(f / "dp_alpha_state"), "--alpha-prior", "2,1"], "--alpha-prior"),
        (memo + ["--resume", str(f / "dp_state"), "--dtype", "float32"], "--dtype"),
        (["fit", str(f / "more.npz"), "--algo", "memo", "--resume", str(f / "dp_state")], "items"),
        (["fit", str(f / "wide.npz"), "--algo", "memo", "--resume", str(f / "dp_state")], "columns"),
        (hdp + ["--resume", str(f / "hdp_state"), "--K", "5", "--batches", "2"], "--K"),
        (hdp + ["--resume", str(f / "hdp_state"), "--K", "4", "--batches", "3"], "--batches"),
        (hdp + ["--resume", str(f / "hdp_state"), "--K", "4", "--batches", "2", "--gamma", "3"], "--gamma"),
        (hdp + ["--resume", str(f / "hdp_state"), "--K", "4", "--batches", "2", "--lam0", "0.5"], "--lam0"),
        (["fit", str(f / "ok.ldac"), "--model", "hdp", "--batches", "2", "--K", "4", "--resume",
          str(f / "hdp_state")], "vocabulary"),
        # --json onto a file of the fit's folder
        (memo + ["--save", str(f / "dp_state"), "--json", str(f / "dp_state" / "state.pt")], "--json"),
        (memo + ["--resume", str(f / "dp_state"), "--json", str(f / "dp_state" / "state.pt")], "--json"),
        (hdp + ["--save", str(f / "hdp_state"), "--json", str(f / "hdp_state" / "topics.txt")], "--json"),
        # more numbers: NaN, infinities, seeds out of range
        (fit + ["--seed", str(2**63)], "--seed"), (hdp + ["--seed", str(2**70)], "--seed"),
        (memo + ["--alpha", "inf"], "--alpha"), (memo + ["--laps", "0"], "--laps"),
        (hdp + ["--gamma", "inf"], "--gamma"), (hdp + ["--lam0", "-1"], "--lam0"), (hdp + ["--tol", "nan"], "--tol"),
        (hdp + ["--alpha", "nan"], "--alpha"),
        (cmp + ["--seeds", "-1"], "--seeds"), (cmp + ["--seeds", f"0,{2**64}"], "--seeds"),
        (cmp + ["--passes", "nan"], "--passes"), (cmp + ["--passes", "inf"], "--passes"),
        (cmp + ["--seconds", "nan"], "--seconds"), (cmp + ["--seconds", "-1"], "--seconds"),
        (cmp + ["--heldout", "nan"], "--heldout"), (cmp + ["--alpha", "inf"], "--alpha"),
        (hcmp + ["--heldout", "1"], "--heldout"), (hcmp + ["--heldout", "nan"], "--heldout"),
        (hcmp + ["--K", "0"], "--K"), (hcmp + ["--batches", "0"], "--batches"), (hcmp + ["--lam0", "0"], "--lam0"),
        (hcmp + ["--alpha", "nan"], "--alpha"), (hcmp + ["--seconds", "inf"], "--seconds"),
        (hcmp + ["--seeds", "-2"], "--seeds"),
        # hdp choices and corpora
        (hdp + ["--init", "magic"], "magic"), (hdp + ["--algo", "vb"], "--batches 1"),
        (hdp + ["--vocab", str(f / "vocab.txt")], "--vocab"), (hdp + ["--vocab", str(f)], "--vocab"),
        (hcmp + ["--vocab", str(f / "vocab.txt")], "--vocab"),
        (["fit", str(f / "empty.ldac"), "--model", "hdp"], "no documents"),
        (fit + ["--init", "kmeans"], "kmeans"),
        # more unwritable places
        (hcmp + ["--out", afile], "--out"), (memo + ["--json", os.path.join(unwritable, "j.json")], "--json"),
        (memo + ["--save", afile], "--save"),
        # priors (--prior KEY=NUMBER,..., --prior-scale S)
        (fit + ["--prior", "kappa"], "KEY=NUMBER"), (fit + ["--prior", "=1"], "KEY=NUMBER"),
        (fit + ["--prior", "foo=1"], "foo"), (fit + ["--prior", "B=2"], "--prior-scale"),
        (fit + ["--prior", "kappa=x"], "kappa"), (fit + ["--prior", "kappa=nan"], "kappa"),
        (fit + ["--prior", "kappa=1,kappa=2"], "twice"), (fit + ["--prior", "kappa=-1"], "kappa"),
        (fit + ["--prior", "nu=1"], "nu"), (fit + ["--prior", "lam=1"], "lam"),
        (fit + ["--prior", "lam=0", "--family", "mult"], "lam"),
        (fit + ["--prior-scale", "0"], "--prior-scale"), (fit + ["--prior-scale", "-1"], "--prior-scale"),
        (fit + ["--prior-scale", "inf"], "--prior-scale"), (fit + ["--prior-scale", "nan"], "--prior-scale"),
        (fit + ["--prior-scale", "2", "--family", "mult"], "--prior-scale"),
        (cmp + ["--prior", "nu=x"], "nu"), (cmp + ["--prior-scale", "0"], "--prior-scale"),
        (hdp + ["--prior", "kappa=1"], "--prior"), (hdp + ["--prior-scale", "2"], "--prior-scale"),
        (memo + ["--resume", str(f / "dp_state"), "--prior", "kappa=0.5"], "prior"),
        (memo + ["--resume", str(f / "dp_state"), "--prior-scale", "2"], "scaled to) differs from the saved"),
        # predict: missing, damaged, foreign or newer model files; data the model cannot take; bad --out
        (["predict", str(f / "nowhere"), good], "nowhere"), (["predict", str(f / "save_nostate"), good], "model.pt"),
        (["predict", str(f / "truncated_model.pt"), good], "damaged"),
        (["predict", str(f / "empty_model.pt"), good], "empty_model.pt"),
        (["predict", str(f / "garbage_model.pt"), good], "garbage_model.pt"),
        (["predict", str(f / "foreign_model.pt"), good], "not a pyro-memo model file"),
        (["predict", str(f / "newer_model.pt"), good], "newer"),
        (["predict", str(f / "dp_state" / "state.pt"), good], "checkpoint"),
        (["predict", str(f / "dp_state"), str(f / "wide.npz")], "columns"),
        (["predict", str(f / "dp_state"), str(f / "nan.npz")], "NaN"),
        (["predict", str(f / "dp_state"), str(f / "missing.npz")], "missing.npz"),
        (["predict", str(f / "dp_state"), str(f / "one_d.npy")], "shape"),
        (["predict", str(f / "dp_state"), str(f / "strings.npy")], "strings.npy"),
        (["predict", str(f / "hdp_state"), good], "good.npz"),
        (["predict", str(f / "hdp_state"), str(f / "bad.ldac")], "bad.ldac"),
        (["predict", str(f / "dp_state")], "DATA"), (["predict"], "MODEL"),
        (["predict", str(f / "dp_state"), good, "--out", str(f)], "--out"),
        (["predict", str(f / "dp_state"), good, "--out", str(f / "p3")], "p3: the predictions are written as an .npz"),
        (["predict", str(f / "dp_state"), good, "--out", os.path.join(unwritable, "p.npz")], "--out"),
        (["predict", str(f / "dp_state"), good, "--out", str(f / "dp_state" / "model.pt")], "--out"),
        (["predict", str(f / "dp_state"), good, "--K", "3"], "--K"),
        # the memory-bounded HDP over groups of items
        (["fit", str(f / "grouped.npz"), "--model", "hdp", "--algo", "memory-bounded"], "--memory"),
        (["fit", str(f / "grouped.npz"), "--model", "hdp", "--algo", "memory-bounded", "--memory", "0", "--epoch", "2"],
         "--memory"),
        (["fit", str(f / "grouped.npz"), "--model", "hdp", "--algo", "memory-bounded", "--memory", "500", "--epoch",
          "2", "--groups", "0"], "--groups"),
        (["fit", str(f / "grouped.npz"), "--model", "hdp", "--algo", "memory-bounded", "--memory", "500", "--epoch",
          "2", "--batches", "3"], "--batches"),
        (["fit", str(f / "grouped.npz"), "--model", "hdp", "--algo", "memory-bounded", "--memory", "3", "--epoch",
          "2"], "cannot hold even one clump"),
        (["fit", good, "--model", "hdp", "--algo", "memory-bounded", "--memory", "500", "--epoch", "2"], "groups"),
        (["fit", str(f / "grouped_float.npz"), "--model", "hdp", "--algo", "memory-bounded", "--memory", "500",
          "--epoch", "2"], "integers"),
        (["fit", str(f / "grouped_short.npz"), "--model", "hdp", "--algo", "memory-bounded", "--memory", "500",
          "--epoch", "2"], "shape"),
        (["fit", str(f / "grouped_nan.npz"), "--model", "hdp", "--algo", "memory-bounded", "--memory", "500",
          "--epoch", "2"], "grouped_nan.npz: x has NaN or inf values in 1 of its 60 rows; the first is row 3"),
        (hdp + ["--memory", "500"], "--memory"),
        # a truncation no memory can hold
        (fit + ["--K", str(10**11), "--laps", "1"], "memory"),
        # birth targets: a positive count, for the birth move of memoized VB
        (fit + ["--algo", "memo", "--moves", "birth", "--birth-targets", "0"], "--birth-targets must be a positive"),
        (fit + ["--algo", "memo", "--moves", "merge,delete", "--birth-targets", "2"], "add birth to --moves"),
        (fit + ["--algo", "vb", "--birth-targets", "2"], "--birth-targets needs --algo memo"),
        (hdp + ["--birth-targets", "2"], "--birth-targets sets the birth move; add birth to --moves"),
        (hdp + ["--algo", "memory-bounded", "--birth-new", "4"], "--birth-new needs --algo memo"),
        (["fit", "--model", "relational", "--birth-targets", "2"], "--birth-targets does not apply to --model "
                                                                    "relational"),
        # truncated or empty array files, sparse matrices and corpus shards
        (["fit", str(f / "half.npz")], "half.npz: cannot read"),
        (["fit", str(f / "half.npz"), "--algo", "memo"], "half.npz: cannot read"),
        (["fit", str(f / "half.npz"), "--model", "hdp"], "half.npz: cannot read"),
        (["fit", str(f / "empty.npz"), "--model", "hdp"], "empty.npz: cannot read"),
        (["fit", str(f / "half.npz"), "--model", "relational"], "half.npz: not a scipy sparse .npz file"),
        (["fit", str(f / "empty.npz"), "--model", "relational"], "empty.npz: not a scipy sparse .npz file"),
        (["fit", str(f / "empty.npz")], "empty.npz: cannot read"),
        (["predict", str(f / "dp_state"), str(f / "half.npz")], "half.npz: cannot read"),
        (["predict", str(f / "hdp_state"), str(f / "half.npz")], "half.npz: cannot read"),
        (["fit", str(f / "short.npy"), "--algo", "memo"], "short.npy: truncated"),
        (["fit", str(f / "shards_half"), "--model", "hdp", "--K", "3", "--batches", "2", "--laps", "1"],
         "not a readable corpus shard"),
        (["fit", str(f / "shards_empty"), "--model", "hdp", "--K", "3", "--batches", "2", "--laps", "1"],
         "not a readable corpus shard"),
        # a directory where --save writes a fit file: refused before the fit
        (memo + ["--save", str(f / "save_dir_model.pt")], "model.pt is a directory"),
        (memo + ["--save", str(f / "save_dir_state.pt")], "state.pt is a directory"),
        (fit + ["--save", str(f / "save_dir_model.pt")], "model.pt is a directory"),
        (hdp + ["--save", str(f / "save_dir_state.pt")], "state.pt is a directory"),
        (["fit", "synthetic", "--model", "relational", "--save", str(f / "save_dir_state.pt")],
         "state.pt is a directory"),
        # predict: --out onto the fit's own files; a relational fit's folder; an unfinished fit's
        (["predict", str(f / "dp_state"), good, "--out", str(f / "dp_state" / "posterior.npz")], "--out"),
        (["predict", str(f / "dp_state" / "model.pt"), good, "--out", str(f / "dp_state" / "topics.npz")], "--out"),
        (["predict", str(f / "relational_state"), good], "a --model relational fit, which predict does not read"),
        (["predict", str(f / "unfinished_state"), good], "only the checkpoint state.pt of a fit that did not finish"),
    ]


#: the table's size (cases() only builds strings, so any folder will do to count them)
CASES = len(cases(pathlib.Path("/nowhere")))


def test_there_are_at_least_80_cases():
    assert CASES >= 80


@pytest.mark.parametrize("index", range(CASES))
def test_a_bad_input_gets_one_error_line_and_status_2(files, tmp_path, capsys, index):
    argv, keyword = cases(files)[index]
    argv = list(argv)
    json_path = tmp_path / "results.json"
    if argv and argv[0] == "fit" and "--json" not in argv and argv != ["fit"]:
        argv += ["--json", str(json_path), "--quiet"]
    before = set(os.listdir(files))
    try:
        status = main(argv)
    except SystemExit as exit_:
        status = exit_.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, (argv, err)
    assert len(lines) == 1 and lines[0].startswith("pyro-memo: error:"), (argv, err)
    assert keyword.lower() in lines[0].lower(), (argv, lines[0])
    assert "Traceback" not in err
    assert not json_path.exists()
    assert set(os.listdir(files)) == before  # nothing written beside the inputs


def test_a_failed_command_removes_the_output_folders_it_created(tmp_path, capsys):
    new = tmp_path / "new" / "a" / "b"
    assert main(["fit", str(tmp_path / "missing.npy"), "--save", str(new), "--quiet"]) == 2
    assert "missing.npy" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    assert main(["compare", str(tmp_path / "missing.npy"), "--out", str(kept)]) == 2
    assert kept.is_dir()  # a folder that was there before is left alone


def _one_error_line(argv, capsys):
    """Run ``argv``; returns its single error line after checking status 2 and no traceback."""
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exit_:
        status = exit_.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and "Traceback" not in err, (argv, status, err)
    assert lines[0].startswith("pyro-memo: error:"), lines
    return lines[0]


@pytest.mark.parametrize("extra", [[], ["--algo", "memo", "--batches", "2"]])
def test_json_onto_the_data_file_is_refused_and_the_data_are_kept(tmp_path, capsys, extra):
    # fit DATA --json DATA overwrote the data file with the JSON results
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(0).normal(size=(30, 2)))
    before = data.read_bytes()
    line = _one_error_line(["fit", data, "--json", data, "--K", "2", "--laps", "1", "--quiet", *extra], capsys)
    assert "--json" in line and "DATA" in line
    assert data.read_bytes() == before


def test_save_onto_the_data_file_is_refused_and_the_data_are_kept(tmp_path, capsys):
    # fit DIR/posterior.npz --save DIR overwrote the data with the fit's posterior.npz
    data = tmp_path / "posterior.npz"
    np.savez(data, x=np.random.default_rng(0).normal(size=(30, 2)))
    before = data.read_bytes()
    line = _one_error_line(["fit", data, "--save", tmp_path, "--K", "2", "--laps", "1", "--quiet"], capsys)
    assert "--save" in line and "DATA" in line
    assert data.read_bytes() == before


def test_denoise_json_onto_an_input_is_refused(tmp_path, capsys):
    # denoise IMAGE --json IMAGE overwrote the image (and --json onto --out the denoised PNG)
    from PIL import Image

    image = tmp_path / "i.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 16), dtype=np.uint8)).save(image)
    before = image.read_bytes()
    model = tmp_path / "model.pt"  # the options are checked before the model is read
    model.write_bytes(b"not read")
    line = _one_error_line(["denoise", image, "--model", model, "--json", image], capsys)
    assert "--json" in line and "IMAGE" in line
    line = _one_error_line(["denoise", image, "--model", model, "--json", model], capsys)
    assert "--json" in line and "--model" in line
    line = _one_error_line(["denoise", image, "--model", model, "--out", tmp_path / "o.png",
                            "--json", tmp_path / "o.png"], capsys)
    assert "--json" in line and "--out" in line
    assert image.read_bytes() == before and not (tmp_path / "o.png").exists()


def test_denoise_refuses_n_with_patches(tmp_path, capsys):
    # --n (patches to draw from the photographs) was silently ignored when --patches gave the patches
    patches = tmp_path / "p.npy"
    np.save(patches, np.zeros((40, 64)))
    line = _one_error_line(["denoise", "camera", "--patches", patches, "--n", "5", "--laps", "1"], capsys)
    assert "--n" in line and "--patches" in line


@pytest.mark.parametrize("argv, keyword", [
    (["--moves", "birth,splat"], "--moves splat"),
    (["--seed", str(2**70)], "--seed"),
    (["--patches", "PATCHES", "--seed", str(2**70)], "--seed"),
    (["--patches", "PATCHES", "--moves", "splat"], "--moves splat"),
])
def test_denoise_checks_its_training_options_before_any_work(tmp_path, capsys, argv, keyword):
    # a bad --moves or a --seed beyond 2**63 - 1 failed only after the training patches were drawn or read,
    # in words that named --patches or no option at all
    patches = tmp_path / "p.npy"
    np.save(patches, np.zeros((40, 64)))
    argv = [patches if a == "PATCHES" else a for a in argv]
    line = _one_error_line(["denoise", "camera", "--laps", "1", *argv], capsys)
    assert keyword in line and "--patches" not in line


@pytest.mark.parametrize("x, family, keyword", [
    (np.zeros((0, 2)), "gauss", "no items"),
    (np.array([["a", "b"]] * 4), "gauss", "numeric"),
    (-np.ones((4, 2)), "mult", "negative"),
])
def test_memory_bounded_hdp_data_errors_name_the_file(tmp_path, capsys, x, family, keyword):
    # an empty x gave "need at least one array to concatenate"; the family's complaints named no file
    data = tmp_path / "grouped.npz"
    np.savez(data, x=x, groups=np.arange(len(x)) // 2)
    line = _one_error_line(["fit", data, "--model", "hdp", "--algo", "memory-bounded", "--memory", "500", "--epoch",
                            "2", "--K", "2", "--family", family, "--quiet"], capsys)
    assert f"{data}:" in line and keyword in line


def test_json_and_save_naming_one_path_is_one_clear_error(tmp_path, capsys):
    # --save created the folder, then --json refused it as "is a directory" although it was not there before
    both = tmp_path / "out"
    line = _one_error_line(["fit", "digits", "--save", both, "--json", both, "--quiet"], capsys)
    assert "--json" in line and "--save" in line and "same path" in line
    assert not both.exists()


def test_denoise_model_errors_name_denoise_and_its_option(files, capsys):
    # denoise --model DIR (a relational fit's folder, or no model.pt) answered as if from predict: "MODEL DIR: ...,
    # which predict does not read"
    for folder in ("relational_state", "save_nostate", "unfinished_state"):
        line = _one_error_line(["denoise", "camera", "--model", files / folder], capsys)
        assert f"--model {files / folder}:" in line and "which predict" not in line and "MODEL" not in line, line


def test_resume_given_the_checkpoint_file_names_the_folder_to_give(tmp_path, capsys):
    """--resume DIR/state.pt said 'no state.pt there (write one with --save DIR/state.pt)', advice that
    fails ('--save DIR/state.pt: exists and is not a directory')."""
    (tmp_path / "save").mkdir()
    (tmp_path / "save" / "state.pt").write_bytes(b"")
    state = tmp_path / "save" / "state.pt"
    assert main(["fit", "digits", "--algo", "memo", "--resume", str(state), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"--resume {state}: is a file" in err and f"(--resume {tmp_path / 'save'})" in err, err
    assert "--save" not in err
