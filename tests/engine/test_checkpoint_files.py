"""Checkpoints (state.pt) and model files (model.pt) read back only as written: a flipped bit, a
damaged or edited dict, a class path outside pyro-memo, a directory or a bad device is one
ValueError naming the file (or the device), never a silently different model, an import of a
module the file names, or a raw traceback."""

import struct
import sys
import zipfile

import numpy as np
import pytest
import torch

import pyro_memo as pm


@pytest.fixture(scope="module")
def fit():
    x = torch.as_tensor(np.random.default_rng(0).normal(size=(120, 2)))
    return pm.MemoizedVB(pm.Gaussian.from_data(x), 3, laps=2, seed=0).fit(x, num_batches=2), x


@pytest.fixture
def files(tmp_path, fit):
    result, _ = fit
    pm.save_state(tmp_path / "state.pt", result.state)
    pm.save_model(tmp_path / "model.pt", result)
    return tmp_path


def _records(path):
    """``(name, first byte, size)`` of each stored record of the zip file ``path`` that holds a tensor."""
    data = path.read_bytes()
    out = []
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if "/data/" not in info.filename or info.file_size == 0:
                continue
            name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
            out.append((info.filename, info.header_offset + 30 + name_len + extra_len, info.file_size))
    return out


@pytest.mark.parametrize("name", ["state.pt", "model.pt"])
def test_a_bit_flipped_in_any_tensor_record_is_refused_naming_the_file(files, name):
    path = files / name
    good = path.read_bytes()
    records = _records(path)
    assert len(records) >= 5
    load = pm.load_state if name == "state.pt" else pm.load_model
    for record, start, size in records:
        for where in (start, start + size // 2, start + size - 1):
            damaged = bytearray(good)
            damaged[where] ^= 0x10
            path.write_bytes(bytes(damaged))
            with pytest.raises(ValueError, match="damaged") as err:
                load(path)
            assert str(path) in str(err.value), record
    path.write_bytes(good)
    load(path)


def test_a_checkpoint_never_imports_a_module_it_names(tmp_path):
    sys.modules.pop("this", None)
    torch.save({"format_version": 2, "posterior_class": "this:X", "posterior": {}}, tmp_path / "imp.pt")
    with pytest.raises(ValueError, match="'this:X'.*pyro_memo modules only") as err:
        pm.load_state(tmp_path / "imp.pt")
    assert str(tmp_path / "imp.pt") in str(err.value)
    assert "this" not in sys.modules  # the Zen of Python was not printed: the module never ran
    sys.modules.pop("pyro_memo.cli.__main__", None)
    torch.save({"format_version": 2, "posterior_class": "pyro_memo.cli.__main__:X", "posterior": {}},
               tmp_path / "main.pt")
    with pytest.raises(ValueError, match="main.pt"):
        pm.load_state(tmp_path / "main.pt")
    assert "pyro_memo.cli.__main__" not in sys.modules


def _edited(d):
    """Damaged or edited checkpoints: name -> (dict, what the error says)."""
    return {
        "bit_generator": ({**d, "rng": d["rng"].replace("PCG64", "uinteger")}, "damaged checkpoint"),
        "rng_syntax": ({**d, "rng": d["rng"][:-3]}, "damaged checkpoint"),
        "only_version": ({"format_version": 2}, "damaged checkpoint.*posterior_class"),
        "laps": ({**d, "laps_done": "three"}, "damaged checkpoint"),
        "posterior": ({**d, "posterior": {}}, "damaged checkpoint"),
        "cache": ({**d, "cache": {"0": {"counts": torch.ones(2)}}}, "damaged checkpoint"),
        "version_text": ({**d, "format_version": "2"}, "damaged checkpoint"),
        "newer": ({**d, "format_version": 99}, "checkpoint format 99.*newer pyro-memo"),
        "class": ({**d, "posterior_class": "pyro_memo.inference:NoSuchPosterior"}, "cannot be imported"),
        "not_posterior": ({**d, "posterior_class": "pyro_memo.summaries:Summary"}, "not a VariationalPosterior"),
    }


@pytest.mark.parametrize("case", list(_edited({"rng": "", "format_version": 2})))
def test_a_damaged_or_edited_checkpoint_is_one_error_naming_the_file(files, case):
    d = torch.load(files / "state.pt", weights_only=True)
    content, match = _edited(d)[case]
    path = files / f"{case}.pt"
    torch.save(content, path)
    with pytest.raises(ValueError, match=match) as err:
        pm.load_state(path)
    assert str(err.value).startswith(f"{path}: "), str(err.value)


def test_a_directory_and_a_foreign_pickle_are_named_as_such(tmp_path):
    (tmp_path / "adir").mkdir()
    with pytest.raises(ValueError, match="adir: is a directory, not a checkpoint"):
        pm.load_state(tmp_path / "adir")
    with pytest.raises(ValueError, match="adir: is a directory, not a model file"):
        pm.load_model(tmp_path / "adir")
    torch.save({"format_version": 2, "posterior": np.random.default_rng(0)}, tmp_path / "object.pt")
    with pytest.raises(ValueError, match="object.pt: cannot read checkpoint") as err:
        pm.load_state(tmp_path / "object.pt")
    # torch's advice to load with weights_only=False would run code from the file: not passed on
    assert "weights_only" not in str(err.value) and "PyTorch 2.6" not in str(err.value)


@pytest.mark.parametrize("device,match", [("foo", "device foo: not a torch device"),
                                          ("mps", "device mps: .*mps is not supported"),
                                          ("meta", "meta is not supported"),
                                          ("cuda:99", "device cuda:99: ")])
def test_a_bad_device_is_refused_before_the_file_is_read(files, device, match):
    for load, name in ((pm.load_state, "state.pt"), (pm.load_model, "model.pt")):
        with pytest.raises(ValueError, match=match) as err:
            load(files / name, device=device)
        assert "damaged" not in str(err.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_one_clear_error(files):
    from pyro_memo.checks import check_device

    with pytest.raises(ValueError, match="device cuda: CUDA is not available"):
        pm.load_model(files / "model.pt", device="cuda")
    with pytest.raises(ValueError, match="--device cuda: CUDA is not available"):
        check_device("cuda", "--device")


def test_cpu_devices_load(files, fit):
    result, x = fit
    labels = result.posterior.responsibilities(x).argmax(-1)
    for device in (None, "cpu", torch.device("cpu")):
        assert torch.equal(pm.load_model(files / "model.pt", device=device).predict(x), labels)
        assert pm.load_state(files / "state.pt", device=device).laps_done == 2


def test_a_save_onto_a_directory_or_under_a_file_is_refused_naming_the_path(tmp_path, fit):
    result, _ = fit
    (tmp_path / "state.pt").mkdir()
    with pytest.raises(IsADirectoryError, match="state.pt: is a directory"):
        pm.save_state(tmp_path / "state.pt", result.state)
    (tmp_path / "w").write_text("a file")
    with pytest.raises(NotADirectoryError, match="x.pt: cannot write there"):
        pm.save_state(tmp_path / "w" / "x.pt", result.state)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.pt", "w"]


@pytest.mark.parametrize("name", ["state.pt", "model.pt"])
def test_an_open_file_loads_as_its_path_does_and_is_checked_alike(files, fit, name):
    import io

    load = pm.load_state if name == "state.pt" else pm.load_model
    good = (files / name).read_bytes()
    loaded = load(io.BytesIO(good))  # the CRC check used to stat the object: a TypeError
    _, x = fit
    if name == "model.pt":
        assert torch.equal(loaded.score_samples(x), load(files / name).score_samples(x))
    else:
        assert loaded.elbo_trace == load(files / name).elbo_trace
    record, start, size = _records(files / name)[0]
    damaged = bytearray(good)
    damaged[start + size // 2] ^= 0x10
    with pytest.raises(ValueError, match="damaged"):
        load(io.BytesIO(bytes(damaged)))


def test_save_state_refuses_what_is_no_state_and_a_path_that_is_no_file_name(tmp_path, monkeypatch, fit):
    """save_state(path, result) (the FitResult, not its .state) raised AttributeError: 'FitResult' object has no
    attribute 'cache'; save_state(None, state) wrote a file named "None" in the working directory."""
    result, _ = fit
    monkeypatch.chdir(tmp_path)
    for bad in (result, result.posterior, None):
        with pytest.raises(TypeError, match=f"save_state needs a MemoState .*; got a {type(bad).__name__}"):
            pm.save_state(tmp_path / "state.pt", bad)
    with pytest.raises(TypeError, match="checkpoint path must be a file name .*; got a NoneType"):
        pm.save_state(None, result.state)
    assert list(tmp_path.iterdir()) == []


def _shortened(d, *keys):
    """``d`` with the tensor at ``d[keys[0]]...[keys[-1]]`` one row short (an edit that keeps the file valid)."""
    d = {**d}
    inner = d
    for key in keys[:-1]:
        inner[key] = {**inner[key]}
        inner = inner[key]
    inner[keys[-1]] = inner[keys[-1]][:-1]
    return d


@pytest.fixture(scope="module")
def other_states():
    from pyro_memo.data.graphs import assortative_graph
    from pyro_memo.relational import MemoizedRelational
    from pyro_memo.topics import MemoizedHDP, from_counts

    counts = np.random.default_rng(1).poisson(1.0, size=(40, 15))
    graph = assortative_graph(30, 3, expected_edges=60, seed=0)[0]
    return {"hdp": MemoizedHDP(K=3, laps=2, seed=0).fit(from_counts(counts), 2).state,
            "relational": MemoizedRelational(K=3, laps=2, seed=0).fit(graph, 2).state}


@pytest.mark.parametrize("kind,keys,match", [
    ("dp", ("posterior", "component", "m"), r"\(K = 3 components from eta1, D = 2 from the family's prior\): "
                                            r"component 'm' is \(2, 2\), expected \(3, 2\)$"),
    ("dp", ("cache", "0", "counts"), r"batch 0 summary counts is \(2,\), expected \(3,\)$"),
    ("hdp", ("posterior", "rho"), r"\(K = 3 topics and V = 15 words from lam\): rho is \(2,\), expected \(3,\)$"),
    ("hdp", ("cache", "1", "word_counts"), r"batch 1 summary word_counts is \(2, 15\), expected \(3, 15\)$"),
    ("relational", ("posterior", "w_a"), r"\(K = 3 communities from rho\): w_a is \(2,\), expected \(3,\)$"),
])
def test_a_checkpoint_with_inconsistent_shapes_is_refused_naming_the_file_and_fields(tmp_path, fit, other_states,
                                                                                     kind, keys, match):
    """A checkpoint edited to shapes that disagree (a DP posterior's component 'm' a row short, an HDP's rho, a
    relational model's w_a) loaded, then failed at resume with torch's "The size of tensor a (3) must match the
    size of tensor b (2)". load_state now refuses it with the model files' shape check, naming the file and the
    fields."""
    state = fit[0].state if kind == "dp" else other_states[kind]
    pm.save_state(tmp_path / "state.pt", state)
    d = torch.load(tmp_path / "state.pt", weights_only=True)
    path = tmp_path / "edited.pt"
    torch.save(_shortened(d, *keys), path)
    with pytest.raises(ValueError, match=r"a checkpoint with inconsistent shapes .*" + match) as err:
        pm.load_state(path)
    assert str(err.value).startswith(f"{path}: ")
    pm.load_state(tmp_path / "state.pt")  # the file as written loads
