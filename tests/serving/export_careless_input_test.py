"""`xlnet-tf export` and `xlnet-tf predict` given the wrong thing: one line saying what is wrong, or the right
export."""

import os

import pytest

from tests.serving.tiny_finetuning_runs import write_fake_finetuning_workdir
from xlnet_tf.cli.main import main


def _error(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, (code, err)
    return err


@pytest.mark.parametrize("kind, message", [
    ("missing", "xlnet-tf export: Work directory {path} does not exist.\n"),
    ("file", ("xlnet-tf export: {path} is a file; --workdir takes the directory of an `xlnet-tf pretrain` or "
              "`xlnet-tf finetune` run.\n")),
    ("empty", ("xlnet-tf export: {path} has no config.yaml: it is not the work directory of an `xlnet-tf pretrain` "
               "or `xlnet-tf finetune` run (nor a fine-tuned task preset).\n")),
])
def test_a_workdir_that_is_not_one(tmp_path, capsys, kind, message):
    path = tmp_path / "run"
    if kind == "file":
        path.write_text("x")
    elif kind == "empty":
        path.mkdir()
    assert _error(["export", "--workdir", str(path), "--output", str(tmp_path / "out")], capsys) == \
        message.format(path=path)


def test_an_output_inside_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    (tmp_path / "run").mkdir()
    output = tmp_path / "file" / "export"
    # Before: a FileExistsError traceback from makedirs.
    assert _error(["export", "--workdir", str(tmp_path / "run"), "--output", str(output)], capsys) == (
        f"xlnet-tf export: Export directory {output} cannot be created: {tmp_path / 'file'} is a file.\n")


def test_a_task_preset_given_as_preset_is_refused_not_exported_as_a_backbone(tmp_path, capsys):
    final = os.path.join(write_fake_finetuning_workdir(tmp_path / "run"), "final")
    # Before: exit 0 with the backbone alone (no fine-tuned head) in the output.
    assert _error(["export", "--preset", final, "--output", str(tmp_path / "out")], capsys) == (
        f"xlnet-tf export: {final} is a fine-tuned task preset; --preset exports a pretrained backbone. "
        f"Export the task with `xlnet-tf export --workdir {final} --output DIR`.\n")
    assert not os.path.exists(tmp_path / "out")


def test_predict_on_a_damaged_savedmodel(tmp_path, capsys):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "saved_model.pb").write_bytes(b"garbage")
    # Before: an OSError traceback from tf.saved_model.load.
    err = _error(["predict", "--model", str(tmp_path / "model"), "text"], capsys)
    assert err.startswith(f"xlnet-tf predict: {str(tmp_path / 'model')!r}: the SavedModel cannot be loaded (")
    assert err.endswith("export it again with `xlnet-tf export`.\n")


def test_convert_output_inside_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    output = tmp_path / "file" / "preset"
    source = os.path.join(os.path.dirname(__file__), "..", "testdata", "hf_parity", "mems")
    assert _error(["convert", "--source", "transformers", "--input", source, "--output", str(output)], capsys) == (
        f"xlnet-tf convert: Preset directory {output} cannot be created: {tmp_path / 'file'} is a file.\n")


@pytest.mark.parametrize("case", ["output is a directory", "output below a file", "negative top-k"])
def test_predict_refuses_bad_options_before_running(tmp_path, capsys, case):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    # The model is never loaded: these are refused first (before, the first two failed with a
    # traceback once every prediction was made; the third printed no top-k).
    argv = ["predict", "--model", str(tmp_path / "no-model"), "text"]
    tail, message = {
        "output is a directory": (["--output", str(tmp_path / "dir")],
                                  f"--output {tmp_path / 'dir'} is a directory; give a file name."),
        "output below a file": (["--output", str(tmp_path / "file" / "x.jsonl")],
                                (f"--output {tmp_path / 'file' / 'x.jsonl'} cannot be created: "
                                 f"{tmp_path / 'file'} is a file.")),
        "negative top-k": (["--top-k", "-1"], "--top-k must be >= 0 (0: off)."),
    }[case]
    assert _error(argv + tail, capsys) == f"xlnet-tf predict: {message}\n"


def test_predict_jsonl_that_is_a_directory(real_classifier_export, tmp_path, capsys):
    _, path, _ = real_classifier_export
    # Before: "no input" (the directory read as an empty file).
    assert _error(["predict", "--model", path, "--jsonl", str(tmp_path)], capsys) == (
        f"xlnet-tf predict: --jsonl {tmp_path} is a directory; give a JSON-lines file.\n")
