"""`xlnet-tf convert` into an existing directory: refused, or with `--overwrite` replaced whole (never mixed)."""

import os
import shutil

import pytest

from xlnet_tf.cli.main import main
from xlnet_tf.convert import verify
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "testdata", "hf_parity")
VOCABULARY = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
# What an earlier conversion (or a fine-tuned task) left: another model's tokenizer and task head.
STALE = {"task.json": b'{"class_name": "XLNetClassifier"}', "task.weights.h5": b"old head",
         "spiece.model": b"old 200-piece vocabulary", "tokenizer.json": b'{"config": {}}',
         "config.json": b'{"old": true}'}


def _old_preset(tmp_path):
    path = tmp_path / "preset"
    path.mkdir()
    for name, data in STALE.items():
        (path / name).write_bytes(data)
    return path


def _contents(path):
    return {name: (path / name).read_bytes() for name in sorted(os.listdir(path))}


def _convert(source, output, *flags):
    return main(["convert", "--source", "transformers", "--input", source, "--output", str(output), *flags])


def _no_temporaries(parent):
    assert not [name for name in os.listdir(parent) if name.startswith(".tmp-")]


def test_a_non_empty_output_is_refused_naming_it_and_the_flag(tmp_path, capsys):
    old = _old_preset(tmp_path)
    assert _convert(os.path.join(FIXTURES, "mems"), old) == 2
    err = capsys.readouterr().err
    assert err == (f"xlnet-tf convert: Preset directory {old} already exists and is not empty; "
                   "pass --overwrite to replace it.\n")
    assert _contents(old) == STALE


def test_overwrite_replaces_the_directory_whole(tmp_path, capsys):
    old = _old_preset(tmp_path)
    assert _convert(os.path.join(FIXTURES, "mems"), old, "--overwrite") == 0, capsys.readouterr().err
    # Only what a fresh conversion writes: no task, tokenizer or vocabulary of the old model.
    fresh = tmp_path / "fresh"
    assert _convert(os.path.join(FIXTURES, "mems"), fresh) == 0
    assert sorted(os.listdir(old)) == sorted(os.listdir(fresh)) == [
        "config.json", "lm_head.weights.h5", "metadata.json", "model.weights.h5"]
    assert XLNetPretrainer.from_preset(str(old)).backbone.config.hidden_dim == 16
    _no_temporaries(tmp_path)
    # An empty directory is a fine output without the flag.
    (tmp_path / "empty").mkdir()
    assert _convert(os.path.join(FIXTURES, "mems"), tmp_path / "empty") == 0


def test_a_failed_conversion_leaves_the_old_directory_intact(tmp_path, capsys):
    old = _old_preset(tmp_path)
    broken = tmp_path / "broken"
    shutil.copytree(os.path.join(FIXTURES, "mems"), broken)
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    assert _convert(str(broken), old, "--overwrite") == 1
    assert "model.safetensors" in capsys.readouterr().err
    assert _contents(old) == STALE
    _no_temporaries(tmp_path)


def test_a_failed_write_leaves_the_old_directory_intact(tmp_path, monkeypatch, capsys):
    old = _old_preset(tmp_path)
    save = XLNetPretrainer.save_to_preset

    def save_then_fail(self, directory, **kwargs):
        save(self, directory, **kwargs)  # a complete preset in the temporary directory, then the disk fails
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(XLNetPretrainer, "save_to_preset", save_then_fail)
    assert _convert(os.path.join(FIXTURES, "mems"), old, "--overwrite") == 1
    assert f"cannot write the preset {old}" in capsys.readouterr().err
    assert _contents(old) == STALE
    _no_temporaries(tmp_path)


def test_a_failed_verification_keeps_the_old_directory(tmp_path, monkeypatch, capsys):
    old = _old_preset(tmp_path)
    monkeypatch.setattr(verify, "verify_conversion", lambda *args, **kwargs: 0.5)
    assert _convert(os.path.join(FIXTURES, "mems"), old, "--overwrite", "--verify") == 1
    assert f"verification failed: max abs difference 0.5 > 0.0001; nothing was written to {old}" in \
        capsys.readouterr().err
    assert _contents(old) == STALE
    _no_temporaries(tmp_path)


@pytest.mark.parametrize("where", ["same", "parent"])
def test_an_output_holding_the_input_is_refused_even_with_overwrite(tmp_path, capsys, where):
    source = tmp_path / "hf" / "mems"
    shutil.copytree(os.path.join(FIXTURES, "mems"), source)
    output = source if where == "same" else tmp_path / "hf"
    before = _contents(source)
    assert _convert(str(source), output, "--overwrite") == 2
    assert f"Preset directory {output} holds the source {source}" in capsys.readouterr().err
    assert _contents(source) == before


def test_an_output_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "preset").write_text("a file")
    assert _convert(os.path.join(FIXTURES, "mems"), tmp_path / "preset", "--overwrite") == 2
    assert f"Preset directory {tmp_path / 'preset'} is a file" in capsys.readouterr().err
