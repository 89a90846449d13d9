"""Named presets end to end against a local server: first use, cache, parity with a local conversion."""

import hashlib
import json
import os
import threading

import numpy as np
import pytest

from tests.presets.conftest import (HF_REPO, RELEASE_ARCHIVE, RELEASE_FOLDER, TF1_DIR, hf_files, leftovers,
                                    model_inputs, publish_hf, release_zip_bytes)
from xlnet_tf.convert.tf1_checkpoint import convert_tf1_checkpoint
from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.presets import PresetError, read_manifest, resolve_preset

ZIP_PATH = "/xlnet/released_models/" + RELEASE_ARCHIVE


def logits(pretrainer):
    return np.asarray(pretrainer(model_inputs(), training=False)["logits"])


def test_release_preset_first_use_downloads_converts_and_caches(server, presets_dir):
    archive = release_zip_bytes()
    server.add_gcs_object(ZIP_PATH, archive)

    directory = resolve_preset("xlnet_base_cased")

    assert directory == os.path.join(presets_dir, "xlnet_base_cased")
    # keras-hub's layout (written by the converters' write_preset) plus the manifest.
    assert sorted(os.listdir(directory)) == ["assets", "config.json", "lm_head.weights.h5", "metadata.json",
                                             "model.weights.h5", "preset_manifest.json", "spiece.model",
                                             "tokenizer.json"]
    assert json.load(open(os.path.join(directory, "config.json")))["registered_name"] == "xlnet_tf>XLNetBackbone"
    expected, _, _ = convert_tf1_checkpoint(TF1_DIR)
    np.testing.assert_allclose(logits(XLNetPretrainer.from_preset(directory)), logits(expected), atol=1e-6, rtol=0)
    manifest = read_manifest("xlnet_base_cased")
    (record,) = manifest["files"]
    assert record["sha256"] == hashlib.sha256(archive).hexdigest()
    assert record["size"] == len(archive)
    assert record["checks"] == ["size == Content-Length", "size == x-goog-stored-content-length",
                                "md5 == x-goog-hash"]
    assert manifest["converted_from"] == RELEASE_FOLDER
    assert leftovers(presets_dir) == ["xlnet_base_cased"]  # No work folder or temporary left.

    # Second use: the cache answers, the server is not asked again.
    assert server.requests[ZIP_PATH] == 1
    assert resolve_preset("xlnet_base_cased") == directory
    assert XLNetBackbone.from_preset(resolve_preset("xlnet_base_cased")).config.num_layers == 2
    assert sum(server.requests.values()) == 1


def test_pretrainer_and_backbone_take_a_preset_name(server, presets_dir):
    server.add_gcs_object(ZIP_PATH, release_zip_bytes())
    expected, _, _ = convert_tf1_checkpoint(TF1_DIR)
    pretrainer = XLNetPretrainer.from_preset("xlnet_base_cased")  # first use: download, convert, cache
    np.testing.assert_allclose(logits(pretrainer), logits(expected), atol=1e-6, rtol=0)
    np.testing.assert_array_equal(pretrainer.lm_bias.numpy(), expected.lm_bias.numpy())
    assert XLNetBackbone.from_preset("xlnet_base_cased").config == expected.backbone.config
    assert server.requests[ZIP_PATH] == 1  # the second name lookup reads the cache


def test_hugging_face_preset_follows_redirects_and_checks_linked_etags(server, presets_dir):
    publish_hf(server)

    directory = resolve_preset("hf_xlnet_base_cased")

    expected, _, _ = convert_transformers_checkpoint(os.path.dirname(TF1_DIR))
    np.testing.assert_allclose(logits(XLNetPretrainer.from_preset(directory)), logits(expected), atol=1e-6, rtol=0)
    files = {r["file"]: r for r in read_manifest("hf_xlnet_base_cased")["files"]}
    assert files["config.json"]["checks"] == ["size == Content-Length", "git blob sha1 == ETag"]
    assert files["model.safetensors"]["checks"] == ["size == Content-Length", "size == X-Linked-Size",
                                                    "sha256 == X-Linked-Etag"]
    assert files["model.safetensors"]["sha256"] == hashlib.sha256(hf_files()["model.safetensors"]).hexdigest()
    assert server.requests["/cdn" + HF_REPO + "model.safetensors"] == 1
    resolve_preset("hf_xlnet_base_cased")
    assert server.requests["/cdn" + HF_REPO + "model.safetensors"] == 1
    assert leftovers(presets_dir) == ["hf_xlnet_base_cased"]


def test_simultaneous_first_uses_download_once(server, presets_dir):
    publish_hf(server)
    server.routes[HF_REPO + "config.json"].delay = 0.3  # Keeps the first caller inside the lock.
    results, errors = [], []

    def use():
        try:
            results.append(resolve_preset("hf_xlnet_base_cased"))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=use) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert results == [os.path.join(presets_dir, "hf_xlnet_base_cased")] * 2
    assert server.requests[HF_REPO + "config.json"] == 1
    assert server.requests["/cdn" + HF_REPO + "model.safetensors"] == 1


def test_unknown_name_lists_the_known_names(server):
    with pytest.raises(PresetError) as error:
        resolve_preset("xlnet-base-cased")
    message = str(error.value)
    assert "Unknown preset 'xlnet-base-cased'" in message
    assert "Did you mean 'xlnet_base_cased'?" in message
    for name in ("xlnet_base_cased", "xlnet_large_cased", "hf_xlnet_base_cased", "hf_xlnet_large_cased"):
        assert name in message
    assert sum(server.requests.values()) == 0


def test_directories_and_handles_pass_through(server, tmp_path):
    assert resolve_preset(str(tmp_path)) == str(tmp_path)
    assert resolve_preset("hf://xlnet/xlnet-base-cased") == "hf://xlnet/xlnet-base-cased"
    assert resolve_preset("kaggle://keras/xlnet/keras/base") == "kaggle://keras/xlnet/keras/base"
    assert sum(server.requests.values()) == 0
