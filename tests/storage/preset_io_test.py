"""`preset_io.fetch` / `hub_file`: hub handles download through each hub's client (monkeypatched, no network)."""

import os

import huggingface_hub
import kagglehub
import pytest
from huggingface_hub.errors import EntryNotFoundError
from kagglehub.exceptions import KaggleApiHTTPError

from xlnet_tf.storage import preset_io


@pytest.fixture
def preset(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


def test_hf_files_come_from_hf_hub_download_and_a_missing_one_is_not_found(preset, monkeypatch):
    calls = []

    def hf_hub_download(repo_id, filename):
        calls.append((repo_id, filename))
        if not (preset / filename).exists():
            raise EntryNotFoundError(f"{filename} not in {repo_id}")
        return str(preset / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    assert preset_io.fetch("hf://someone/tiny", "config.json") == str(preset / "config.json")
    assert preset_io.fetch("hf://someone/tiny", "spiece.model", required=False) is None
    with pytest.raises(FileNotFoundError, match="Preset hf://someone/tiny has no task.json"):
        preset_io.fetch("hf://someone/tiny", "task.json")
    assert calls == [("someone/tiny", "config.json"), ("someone/tiny", "spiece.model"),
                     ("someone/tiny", "task.json")]


def test_kaggle_404_is_not_found_and_other_errors_pass_through(preset, monkeypatch):
    def model_download(handle, path):
        if path == "config.json":
            return os.path.join(str(preset), path)
        if path == "unlisted.h5":
            raise ValueError(f"'{path}' is not present in the model files.")
        raise KaggleApiHTTPError("403 Client Error: Forbidden" if path == "gated.h5" else "404 Client Error")

    monkeypatch.setattr(kagglehub, "model_download", model_download)
    handle = "kaggle://someone/xlnet/keras/tiny"
    assert preset_io.hub_file(handle, "config.json") == str(preset / "config.json")
    with pytest.raises(FileNotFoundError, match="model.weights.h5 does not exist in preset kaggle://"):
        preset_io.hub_file(handle, "model.weights.h5")
    with pytest.raises(FileNotFoundError, match="unlisted.h5 does not exist"):
        preset_io.hub_file(handle, "unlisted.h5")
    with pytest.raises(KaggleApiHTTPError, match="403"):
        preset_io.hub_file(handle, "gated.h5")


def test_a_missing_hub_client_names_the_package(monkeypatch):
    real_import = preset_io.importlib.import_module

    def import_module(name):
        if name == "modelscope":
            raise ModuleNotFoundError("No module named 'modelscope'", name="modelscope")
        return real_import(name)

    monkeypatch.setattr(preset_io.importlib, "import_module", import_module)
    with pytest.raises(ImportError, match="modelscope://org/tiny needs the modelscope package: pip install modelscope"):
        preset_io.hub_file("modelscope://org/tiny", "config.json")
