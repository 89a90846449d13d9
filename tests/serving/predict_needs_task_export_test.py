"""`xlnet-tf predict --model` pointed at something other than a task SavedModel: what it is, and what to do."""

import os

import pytest

from tests.serving.tiny_finetuning_runs import write_fake_finetuning_workdir
from xlnet_tf.cli.main import main

HOW = ("`xlnet-tf predict` needs the SavedModel of a fine-tuned task: fine-tune one with `xlnet-tf finetune "
       "--init PRESET --workdir RUN ...`, then export it with `xlnet-tf export --workdir RUN --output DIR` and "
       "pass --model DIR.")


def _predict(model, capsys):
    code = main(["predict", "--model", str(model), "a fine film"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    return err


def test_a_backbone_savedmodel_asks_for_a_fine_tuned_task_export(backbone_export, capsys):
    saved_model = os.path.join(backbone_export[1], "saved_model")
    assert _predict(saved_model, capsys) == (
        f"xlnet-tf predict: {saved_model!r} is a pretrained backbone (token ids in, hidden states out); {HOW}\n")


def test_the_backbone_export_directory_says_the_same(backbone_export, capsys):
    export = backbone_export[1]
    assert _predict(export, capsys) == f"xlnet-tf predict: {export!r} is the export of a pretrained backbone; {HOW}\n"


def test_a_fine_tuning_workdir_is_to_be_exported_first(tmp_path, capsys):
    workdir = write_fake_finetuning_workdir(tmp_path / "run")
    assert f"export it first: `xlnet-tf export --workdir {workdir} --output DIR`" in _predict(workdir, capsys)


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_missing_path_or_a_file(tmp_path, capsys, kind):
    path = tmp_path / "model"
    if kind == "file":
        path.write_text("not a model")
    expected = "does not exist." if kind == "missing" else "is a file; pass the SavedModel directory"
    assert expected in _predict(path, capsys)


def test_an_ids_only_task_export_names_the_strings_in_export(tmp_path, capsys):
    from tests.serving.conftest import SEQUENCE_LENGTH, make_task_model
    from xlnet_tf.serving.export_task_model import export_task_model

    path = export_task_model(make_task_model(3), str(tmp_path / "ids"), task="classification",
                             sequence_length=SEQUENCE_LENGTH)
    assert _predict(path, capsys) == (
        f"xlnet-tf predict: {path!r} is a classification model exported ids-only (no strings-in "
        "`serving_default`); export it again with the strings-in signature (`xlnet-tf export --workdir RUN "
        "--output DIR`, or `export_task_workdir` with text_signature=True, the default).\n")
