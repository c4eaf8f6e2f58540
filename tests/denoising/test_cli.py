"""``pyro-memo patches`` and ``pyro-memo denoise`` end to end on a tiny setting, and their one-line errors."""

import json

import numpy as np
import pytest
from PIL import Image

from pyro_memo.cli import main
from pyro_memo.denoising import PHOTOGRAPHS, GaussianMixturePrior, fit_patch_mixture, load_image, sample_patches


def _run(argv, capsys):
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exit_:
        status = exit_.code
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A zm-gauss DP mixture fitted by ``pyro-memo fit`` to a patch file ``pyro-memo patches`` wrote."""
    folder = tmp_path_factory.mktemp("denoise")
    patches = folder / "patches.npy"
    assert main(["patches", str(patches), "brick", "moon", "--n", "3000", "--seed", "1"]) == 0
    assert main(["fit", str(patches), "--family", "zm-gauss", "--algo", "memo", "--K", "3", "--laps", "2",
                 "--batches", "2", "--save", str(folder / "model"), "--quiet"]) == 0
    return folder


def test_patches_writes_what_the_library_draws(saved_model, capsys):
    x = np.load(saved_model / "patches.npy")
    expected = sample_patches([load_image("brick"), load_image("moon")], 3000, seed=1)
    np.testing.assert_array_equal(x, expected)


def test_denoise_with_a_saved_model(saved_model, tmp_path, capsys):
    status, out, _ = _run(["denoise", "camera", "--model", saved_model / "model", "--crop", "40", "--method", "epll",
                           "--out", tmp_path / "d.png", "--json", tmp_path / "d.json"], capsys)
    assert status == 0
    result = json.loads((tmp_path / "d.json").read_text())
    assert result["psnr_denoised"] > result["psnr_noisy"] + 2.0 and result["shape"] == [40, 40]
    assert f"{result['psnr_denoised']:.2f} dB" in out and len(out.strip().splitlines()) == 1
    png = np.asarray(Image.open(tmp_path / "d.png"))
    assert png.shape == (40, 40) and png.dtype == np.uint8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.json", "d.png"]


def test_denoise_z_step_is_the_library_epll_with_that_z_step(saved_model, tmp_path, capsys):
    from pyro_memo.denoising import add_noise, center_crop, epll_denoise, psnr
    from pyro_memo.model_file import load_model

    prior = GaussianMixturePrior.from_posterior(load_model(saved_model / "model" / "model.pt"))
    clean = center_crop(load_image("camera"), 40)
    noisy = add_noise(clean, 25.0, seed=0)
    for z_step in ("map", "mmse"):
        argv = ["denoise", "camera", "--model", saved_model / "model", "--crop", "40", "--method", "epll",
                "--json", tmp_path / f"{z_step}.json"]
        status, _, _ = _run(argv + ([] if z_step == "map" else ["--z-step", z_step]), capsys)
        result = json.loads((tmp_path / f"{z_step}.json").read_text())
        assert status == 0 and result["z_step"] == z_step
        expected = psnr(clean, epll_denoise(noisy, prior, 25.0, z_step=z_step))
        assert result["psnr_denoised"] == pytest.approx(expected, abs=1e-9)


def test_denoise_trains_a_prior_when_given_no_model(tmp_path, capsys):
    status, _, _ = _run(["denoise", "camera", "--crop", "32", "--n", "2000", "--K", "2", "--laps", "2",
                         "--batches", "2", "--moves", "", "--init-items", "500", "--save", tmp_path / "m",
                         "--json", tmp_path / "r.json", "--sigma", "30", "--seed", "3"], capsys)
    assert status == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["psnr_denoised"] > result["psnr_noisy"] and result["laps"] == 2 and result["sigma"] == 30
    assert result["birth_targets"] is None  # no birth move
    assert "12 bundled photographs" not in result["trained_on"] and f"{len(PHOTOGRAPHS) - 1} bundled" in \
        result["trained_on"]
    assert (tmp_path / "m" / "model.pt").is_file()


@pytest.mark.slow
def test_denoise_birth_targets_reach_the_birth_move(saved_model, tmp_path, capsys):
    """``--birth-targets 2`` trains the prior ``fit_patch_mixture`` gives with two birth targets a lap,
    which is not the one-target prior; without the option a birth targets four components."""
    patches = saved_model / "patches.npy"
    common = ["denoise", "camera", "--crop", "32", "--patches", patches, "--laps", "4", "--batches", "2"]
    assert _run(common + ["--json", tmp_path / "d.json"], capsys)[0] == 0
    assert json.loads((tmp_path / "d.json").read_text())["birth_targets"] == 4
    assert _run(common + ["--birth-targets", "2", "--json", tmp_path / "r.json"], capsys)[0] == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["birth_targets"] == 2
    for targets in (2, 1):
        fit = fit_patch_mixture(str(patches), K=1, laps=4, batches=2, move_options={"birth": {"targets": targets}})
        weights = GaussianMixturePrior.from_posterior(fit.posterior).weights.tolist()
        same = len(weights) == len(result["weights"]) and np.allclose(weights, result["weights"])
        assert same == (targets == 2), (targets, weights, result["weights"])


def test_bad_inputs_get_one_error_line(saved_model, tmp_path, capsys):
    text = tmp_path / "not_an_image.png"
    text.write_text("hello")
    two_pages = tmp_path / "pages.tif"  # a grey + alpha PNG (LA) is an image now, two pages are not one
    second = Image.fromarray(np.ones((20, 20), np.uint8))
    Image.fromarray(np.zeros((20, 20), dtype=np.uint8)).save(two_pages, save_all=True, append_images=[second])
    tiny = tmp_path / "tiny.png"
    Image.fromarray(np.zeros((5, 30), dtype=np.uint8)).save(tiny)
    np.save(tmp_path / "p63.npy", np.zeros((40, 63)))
    np.save(tmp_path / "p64.npy", np.zeros((40, 64)))
    np.save(tmp_path / "p1d.npy", np.zeros(64))
    (tmp_path / "text.npy").write_text("hello")
    with_nan = np.random.default_rng(0).normal(size=(300, 64))
    with_nan[123, 5] = np.nan
    np.save(tmp_path / "pnan.npy", with_nan)
    assert main(["fit", "digits", "--family", "gauss", "--K", "2", "--laps", "1", "--save", str(tmp_path / "g"),
                 "--quiet"]) == 0
    capsys.readouterr()
    model = saved_model / "model"
    cases = [
        (["denoise", tmp_path / "missing.png", "--model", model], "missing.png"),
        (["denoise", text, "--model", model], "not a readable image"),
        (["denoise", two_pages, "--model", model], "2-D"),
        (["denoise", tiny, "--model", model], "smaller than"),
        (["denoise", "camera", "--model", model, "--sigma", "0"], "--sigma"),
        (["denoise", "camera", "--model", model, "--sigma", "-5"], "--sigma"),
        (["denoise", "camera", "--model", model, "--sigma", "nan"], "--sigma"),
        (["denoise", "camera", "--model", model, "--sigma", "1e160"], "--sigma must lie in [1e-06, 1e+06]"),
        (["denoise", "camera", "--model", model, "--sigma", "1e-300"], "--sigma must lie in [1e-06, 1e+06]"),
        (["denoise", "camera", "--model", tmp_path / "nowhere"], "nowhere"),
        (["denoise", "camera", "--model", tmp_path / "g"], "zm-gauss"),
        (["denoise", "camera", "--model", model, "--laps", "3"], "--laps"),
        (["denoise", "camera", "--model", model, "--out", tmp_path / "d.jpg"], ".png"),
        (["denoise", tiny, "--model", model, "--out", tiny], "names the input IMAGE"),
        (["denoise", "camera", "--model", model, "--crop", "4"], "--crop"),
        (["denoise", "camera", "--model", model, "--z-step", "mmse"], "--method epll"),
        (["denoise", "camera", "--model", model, "--method", "epll", "--z-step", "mean"], "'map', 'mmse'"),
        (["denoise", "camera", "--patches", tmp_path / "none.npy"], "none.npy"),
        (["denoise", "camera", "--patches", tmp_path / "p63.npy"], "square patches"),
        (["denoise", "camera", "--patches", tmp_path / "p1d.npy"], "got shape (64,)"),
        (["denoise", "camera", "--patches", tmp_path / "text.npy"], "text.npy: not a .npy array file"),
        (["denoise", "camera", "--patches", tmp_path / "pnan.npy"], "pnan.npy: zm-gauss data has NaN or inf"),
        (["denoise", "camera", "--patches", tmp_path / "pnan.npy"], "the first is row 123"),
        (["denoise", "camera", "--n", "0"], "--n"),
        # "the number of batches must be between 1 and N = 5; got 10", naming neither option, after the
        # photographs were read (10 s)
        (["denoise", "camera", "--n", "5"], "--batches 10 exceeds the number of training patches (5)"),
        (["denoise", "camera", "--patches", tmp_path / "p64.npy", "--batches", "50"],
         "--batches 50 exceeds the number of training patches (40)"),
        (["denoise", "camera", "--init-items", "0"], "--init-items must be a positive integer"),
        (["denoise", "camera", "--model", model, "--init-items", "500"], "--init-items: training options"),
        (["denoise", "camera", "--birth-targets", "0"], "--birth-targets must be a positive integer"),
        (["denoise", "camera", "--moves", "merge", "--birth-targets", "2"], "add birth to --moves"),
        (["denoise", "camera", "--moves", "", "--birth-targets", "1"], "add birth to --moves"),
        (["denoise", "camera", "--model", model, "--birth-targets", "2"], "--birth-targets: training options"),
        # the JSON overwrote the model.pt just saved there
        (["denoise", "camera", "--save", tmp_path / "s", "--json", tmp_path / "s" / "model.pt", "--n", "300",
          "--laps", "1", "--batches", "1", "--moves", "", "--crop", "16"], "names a file --save"),
        (["patches", tmp_path / "p.txt"], ".npy"),
        (["patches", tmp_path / "p.npy", "--exclude", "lena"], "lena"),
        (["patches", tmp_path / "p.npy", tmp_path / "missing.png"], "missing.png"),
        (["patches", tmp_path / "p.npy", "--n", "0"], "--n"),
    ]
    before = sorted(p.name for p in tmp_path.iterdir())
    for argv, keyword in cases:
        status, _, err = _run(argv, capsys)
        lines = [line for line in err.splitlines() if line.strip()]
        assert status == 2 and len(lines) == 1, (argv, err)
        assert lines[0].startswith("pyro-memo: error:") and keyword.lower() in lines[0].lower(), (argv, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("sigma", ["1e160", "1e-300"])
def test_denoise_refuses_a_noise_level_out_of_range_before_any_work(tmp_path, capsys, sigma):
    # 1e160 raised a raw OverflowError (sigma ** 2); 1e-300 printed "PSNR inf dB" and wrote Infinity into --json
    image = tmp_path / "i.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 16), dtype=np.uint8)).save(image)
    prior = tmp_path / "nowhere"  # the range is checked with the options, before the model is read
    status, out, err = _run(["denoise", image, "--model", prior, "--sigma", sigma, "--json", tmp_path / "d.json"],
                            capsys)
    assert status == 2 and out == "" and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and "--sigma must lie in [1e-06, 1e+06]" in err
    assert not (tmp_path / "d.json").exists()


def test_crop_and_image_are_checked_against_the_training_patches_before_training(tmp_path, capsys, monkeypatch):
    """--crop was held to 8 pixels whatever the patches (6 x 6 --patches with --crop 7 refused), and an image
    smaller than --patches' 16 x 16 patches was found so only after the whole prior had been trained (1 min 55 s
    on camera --crop 12)."""
    import pyro_memo.denoising as denoising

    camera = load_image("camera")
    np.save(tmp_path / "p6.npy", sample_patches([camera], 300, size=6, seed=0))
    np.save(tmp_path / "p16.npy", sample_patches([camera], 300, size=16, seed=0))
    small = ["--laps", "1", "--batches", "1", "--moves", ""]
    status, out, err = _run(["denoise", "camera", "--patches", tmp_path / "p6.npy", "--crop", "7", *small], capsys)
    assert status == 0 and "camera (7 x 7)" in out, err
    monkeypatch.setattr(denoising, "fit_patch_mixture", lambda *args, **kwargs: pytest.fail("trained"))
    tiny = tmp_path / "tiny.png"
    Image.fromarray(camera[:12, :20].astype(np.uint8)).save(tiny)
    for argv, keyword in (
        ([tiny, "--patches", tmp_path / "p16.npy"], f"{tiny}: the image (12 x 20) is smaller than a 16 x 16 patch"),
        (["camera", "--patches", tmp_path / "p16.npy", "--crop", "12"], "--crop must be at least 16 (pixels, the side "
                                                                         "of a patch); got 12"),
        (["camera", "--patches", tmp_path / "p6.npy", "--crop", "5"], "--crop must be at least 6"),
        (["camera", "--crop", "7"], "--crop must be at least 8"),
    ):
        status, _, err = _run(["denoise", *argv, *small], capsys)
        assert status == 2 and err.strip().startswith(f"pyro-memo: error: {keyword}"), err
