"""`xlnet-tf convert` on damaged input files: one line naming the file, exit code 1, no traceback."""

import os
import shutil

import pytest

from xlnet_tf.cli import convert as cli

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "testdata", "hf_parity", "two_stream")


def _convert(capsys, source, path, output):
    code = cli.main(["--source", source, "--input", str(path), "--output", str(output)])
    captured = capsys.readouterr()
    return code, captured.err


def _one_clear_line(err, *names):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("xlnet-tf convert: ")
    assert "Traceback" not in err
    for name in names:
        assert name in lines[0]
    return lines[0]


def _hf_copy(tmp_path):
    source = tmp_path / "hf"
    source.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(FIXTURES, name), source / name)
    return source


def test_truncated_safetensors_names_the_file(tmp_path, capsys):
    source = _hf_copy(tmp_path)
    weights = source / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    code, err = _convert(capsys, "transformers", source, tmp_path / "out")
    assert code == 1
    line = _one_clear_line(err, str(weights))
    assert "truncated or corrupt" in line
    assert not (tmp_path / "out").exists()


def test_garbage_safetensors_index_names_the_file(tmp_path, capsys):
    source = _hf_copy(tmp_path)
    os.remove(source / "model.safetensors")
    (source / "model.safetensors.index.json").write_text("{not json")
    code, err = _convert(capsys, "transformers", source, tmp_path / "out")
    assert code == 1
    _one_clear_line(err, "model.safetensors.index.json", "weight_map")


@pytest.mark.parametrize("damage", ["data", "index"])
def test_garbage_tf1_checkpoint_names_the_checkpoint(tmp_path, capsys, damage):
    source = tmp_path / "tf1"
    shutil.copytree(os.path.join(FIXTURES, "tf1"), source)
    if damage == "data":
        for name in os.listdir(source):
            if ".data-" in name:
                (source / name).write_bytes(b"\x00garbage" * 7)
    else:
        (source / "xlnet_model.ckpt.index").write_bytes(b"this is not a checkpoint index" * 3)
    code, err = _convert(capsys, "tf1", source, tmp_path / "out")
    assert code == 1
    line = _one_clear_line(err, str(source / "xlnet_model.ckpt"))
    assert "not a readable TF checkpoint" in line


def test_garbage_config_names_the_file(tmp_path, capsys):
    source = tmp_path / "tf1"
    shutil.copytree(os.path.join(FIXTURES, "tf1"), source)
    (source / "xlnet_config.json").write_text("{\"d_model\": ")
    code, err = _convert(capsys, "tf1", source, tmp_path / "out")
    assert code == 1
    _one_clear_line(err, "xlnet_config.json")
