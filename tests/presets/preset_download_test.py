"""Failed downloads and checks: a clear error naming the file and both values, no cache entry, no temporary."""

import hashlib
import os
import zipfile

import pytest

from tests.presets.conftest import HF_REPO, RELEASE_ARCHIVE, hf_files, leftovers, publish_hf, release_zip_bytes
from xlnet_tf.presets import (PresetError, PresetFile, PresetSpec, is_cached, register_preset, resolve_preset)
from xlnet_tf.presets import preset_registry

ZIP_PATH = "/xlnet/released_models/" + RELEASE_ARCHIVE


def failure(name):
    with pytest.raises(PresetError) as error:
        resolve_preset(name)
    assert not is_cached(name)
    return str(error.value)


def test_connection_closed_early_is_a_truncated_download(server, presets_dir):
    archive = release_zip_bytes()
    server.add_gcs_object(ZIP_PATH, archive, send_bytes=1000)
    message = failure("xlnet_base_cased")
    assert message.startswith(f"{RELEASE_ARCHIVE}: truncated download from http://127.0.0.1:")
    assert f"expected {len(archive)} bytes (Content-Length), received 1000" in message
    assert leftovers(presets_dir) == []


def test_wrong_stored_length_is_reported(server, presets_dir):
    archive = release_zip_bytes()
    server.add_gcs_object(ZIP_PATH, archive)
    server.routes[ZIP_PATH].headers["x-goog-stored-content-length"] = str(len(archive) + 7)
    message = failure("xlnet_base_cased")
    assert (f"{RELEASE_ARCHIVE}: size (x-goog-stored-content-length) mismatch" in message
            and f"expected {len(archive) + 7} bytes, received {len(archive)} bytes" in message)
    assert leftovers(presets_dir) == []


def test_md5_mismatch_names_file_and_both_hashes(server, presets_dir):
    archive = release_zip_bytes()
    server.add_gcs_object(ZIP_PATH, archive, md5_body=b"something else")
    message = failure("xlnet_base_cased")
    import base64

    stated = base64.b64encode(hashlib.md5(b"something else").digest()).decode()
    received = base64.b64encode(hashlib.md5(archive).digest()).decode()
    assert f"{RELEASE_ARCHIVE}: md5 (x-goog-hash) mismatch" in message
    assert f"expected md5={stated}, received md5={received}" in message
    assert leftovers(presets_dir) == []


def test_bad_crc_inside_the_zip_names_the_member(server, presets_dir):
    archive = release_zip_bytes(compression=zipfile.ZIP_STORED)
    assert archive.count(b'"n_layer": 2') == 1
    corrupt = archive.replace(b'"n_layer": 2', b'"n_layer": 3')  # Server hashes match: only the CRC catches it.
    server.add_gcs_object(ZIP_PATH, corrupt)
    message = failure("xlnet_base_cased")
    assert "member 'xlnet_cased_L-12_H-768_A-12/xlnet_config.json' is corrupt" in message
    assert "Bad CRC-32" in message
    assert leftovers(presets_dir) == []


def test_hugging_face_sha256_mismatch(server, presets_dir):
    publish_hf(server, sha256="0" * 64)
    message = failure("hf_xlnet_base_cased")
    received = hashlib.sha256(hf_files()["model.safetensors"]).hexdigest()
    assert "model.safetensors: sha256 (X-Linked-Etag) mismatch" in message
    assert f"expected {'0' * 64}, received {received}" in message
    assert leftovers(presets_dir) == []


def test_hugging_face_truncated_lfs_file(server, presets_dir):
    publish_hf(server, send_bytes=100)
    message = failure("hf_xlnet_base_cased")
    size = len(hf_files()["model.safetensors"])
    assert "model.safetensors: truncated download" in message
    assert f"expected {size} bytes (Content-Length), received 100" in message
    assert leftovers(presets_dir) == []


def test_missing_safetensors_explains_the_fix(server, presets_dir):
    publish_hf(server)
    del server.routes[HF_REPO + "model.safetensors"]
    message = failure("hf_xlnet_base_cased")
    assert "model.safetensors: download from" in message and "HTTP 404" in message
    assert "safe_serialization=True" in message
    assert leftovers(presets_dir) == []


def test_recorded_checksum_is_checked(server, presets_dir, monkeypatch):
    monkeypatch.setattr(preset_registry, "PRESETS", dict(preset_registry.PRESETS))
    archive = release_zip_bytes()
    server.add_gcs_object("/xlnet/released_models/mirror.zip", archive)
    register_preset(PresetSpec(name="pinned", source="tf1_release", location="mirror.zip",
                               files=(PresetFile("mirror.zip", sha256="ab" * 32, size=len(archive)),),
                               description="test"))
    message = failure("pinned")
    assert "mirror.zip: sha256 (recorded in the preset registry) mismatch" in message
    assert f"expected {'ab' * 32}, received {hashlib.sha256(archive).hexdigest()}" in message


def test_stale_temporaries_of_a_killed_attempt_are_removed(server, presets_dir):
    server.add_gcs_object(ZIP_PATH, release_zip_bytes())
    stale = [os.path.join(presets_dir, f".tmp-{'a' * 32}-xlnet_base_cased"),
             os.path.join(presets_dir, f".tmp-{'b' * 32}-xlnet_base_cased.download")]
    for path in stale:
        os.makedirs(path)
        with open(os.path.join(path, "partial.bin"), "wb") as f:
            f.write(b"half")
    os.makedirs(os.path.join(presets_dir, "xlnet_base_cased"))  # An entry without a manifest is not trusted.
    directory = resolve_preset("xlnet_base_cased")
    assert leftovers(presets_dir) == ["xlnet_base_cased"]
    assert os.path.isfile(os.path.join(directory, "preset_manifest.json"))


def test_unreachable_server_names_the_url(monkeypatch, tmp_path):
    monkeypatch.setenv("XLNET_TF_HOME", str(tmp_path))
    monkeypatch.setenv("XLNET_TF_RELEASE_BASE_URL", "http://127.0.0.1:9/nothing")  # Discard port: refused.
    message = failure("xlnet_base_cased")
    assert message.startswith(f"{RELEASE_ARCHIVE}: cannot reach http://127.0.0.1:9/nothing/{RELEASE_ARCHIVE}")
