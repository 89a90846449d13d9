"""Fixtures of the preset tests: an isolated cache, a local server, tiny release and Hugging Face files."""

import io
import os
import zipfile

import numpy as np
import pytest

from tests.presets.preset_server import PresetServer

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "testdata")
CASE_DIR = os.path.join(TESTDATA, "hf_parity", "two_stream")
TF1_DIR = os.path.join(CASE_DIR, "tf1")
SPIECE = os.path.join(TESTDATA, "tiny_spiece.model")
RELEASE_FOLDER = "xlnet_cased_L-12_H-768_A-12"
RELEASE_ARCHIVE = "cased_L-12_H-768_A-12.zip"
HF_REPO = "/xlnet/xlnet-base-cased/resolve/main/"


def read(path):
    with open(path, "rb") as f:
        return f.read()


def release_zip_bytes(compression=zipfile.ZIP_DEFLATED):
    """A tiny archive in the released layout: one folder with the checkpoint, config and vocabulary."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        zf.writestr(RELEASE_FOLDER + "/", b"")
        for name in sorted(os.listdir(TF1_DIR)):
            zf.write(os.path.join(TF1_DIR, name), f"{RELEASE_FOLDER}/{name}")
        zf.write(SPIECE, f"{RELEASE_FOLDER}/spiece.model")
    return buffer.getvalue()


def hf_files():
    return {"config.json": read(os.path.join(CASE_DIR, "config.json")),
            "model.safetensors": read(os.path.join(CASE_DIR, "model.safetensors")),
            "spiece.model": read(SPIECE)}


def publish_hf(server, files=None, **safetensors_options):
    files = files or hf_files()
    server.add_hf_file(HF_REPO + "config.json", files["config.json"], lfs=False)
    server.add_hf_file(HF_REPO + "spiece.model", files["spiece.model"], lfs=True)
    server.add_hf_file(HF_REPO + "model.safetensors", files["model.safetensors"], lfs=True,
                       **safetensors_options)


def model_inputs():
    data = np.load(os.path.join(CASE_DIR, "io.npz"))
    keys = ("token_ids", "segment_ids", "padding_mask", "perm_mask", "target_mapping")
    return {k: data["seg0_" + k] for k in keys if "seg0_" + k in data.files}


def leftovers(presets_dir):
    """Everything in the presets folder except the lock files (which are empty and reused)."""
    if not os.path.isdir(presets_dir):
        return []
    return sorted(n for n in os.listdir(presets_dir) if not n.startswith(".lock-"))


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A local server that both sources point to, and a cache under tmp_path."""
    monkeypatch.setenv("XLNET_TF_HOME", str(tmp_path / "home"))
    with PresetServer() as preset_server:
        monkeypatch.setenv("XLNET_TF_RELEASE_BASE_URL", preset_server.url("/xlnet/released_models"))
        monkeypatch.setenv("XLNET_TF_HF_BASE_URL", preset_server.url())
        yield preset_server


@pytest.fixture
def presets_dir(server, tmp_path):
    return str(tmp_path / "home" / "presets")
