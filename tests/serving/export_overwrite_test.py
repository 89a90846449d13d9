"""`xlnet-tf export` into an existing directory: one line naming it and `--overwrite`, or replaced whole."""

import os

import pytest

from tests.serving.tiny_finetuning_runs import write_fake_finetuning_workdir
from xlnet_tf.cli.main import main
from xlnet_tf.formats.serving_metadata import METADATA_FILE


def _stale_directory(path):
    """An earlier export's leftovers: a file and a `variables/` folder of another model."""
    (path / "variables").mkdir(parents=True)
    (path / "variables" / "variables.index").write_bytes(b"old variables")
    (path / "stale.txt").write_text("old")
    return path


def _files(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, names in os.walk(path) for f in names)


def _no_temporaries(parent):
    assert not [name for name in os.listdir(parent) if name.startswith(".tmp-")]


@pytest.mark.parametrize("source", ["--workdir", "--preset"])
def test_a_non_empty_output_is_refused_in_one_line(source, backbone_export, tmp_path, capsys):
    # Refused before anything is read: the work directory's files are never opened.
    directory = write_fake_finetuning_workdir(tmp_path / "run") if source == "--workdir" else backbone_export[0]
    output = _stale_directory(tmp_path / "export")
    before = _files(output)
    assert main(["export", source, directory, "--output", str(output)]) == 2
    assert capsys.readouterr().err == (f"xlnet-tf export: Export directory {output} already exists and is not "
                                       "empty; pass --overwrite to replace it.\n")
    assert _files(output) == before


@pytest.mark.large
@pytest.mark.slow
@pytest.mark.subprocess  # the fine-tuning run of `finetuned_workdir`
def test_overwrite_replaces_a_task_export_whole(finetuned_workdir, tmp_path, capsys):
    output = _stale_directory(tmp_path / "export")
    # The run's task preset (`final/`) exports as the run does (`--workdir RUN` itself: the bfloat16 tests).
    final = os.path.join(finetuned_workdir("classification"), "final")
    code = main(["export", "--workdir", final, "--output", str(output), "--overwrite"])
    assert code == 0, capsys.readouterr().err
    files = _files(output)
    assert "stale.txt" not in files and "saved_model.pb" in files and METADATA_FILE in files
    with open(output / "variables" / "variables.index", "rb") as f:
        assert f.read() != b"old variables"
    _no_temporaries(tmp_path)


@pytest.mark.slow
def test_overwrite_replaces_a_backbone_export_whole(backbone_export, tmp_path, capsys):
    preset, fresh = backbone_export
    output = _stale_directory(tmp_path / "export")
    assert main(["export", "--preset", preset, "--output", str(output), "--overwrite"]) == 0, capsys.readouterr().err
    # Exactly the files of a fresh export: the preset and the SavedModel, nothing of before.
    assert _files(output) == _files(fresh)
    _no_temporaries(tmp_path)


@pytest.mark.parametrize("where", ["same", "parent"])
def test_an_output_holding_the_source_is_refused_even_with_overwrite(tmp_path, capsys, where):
    workdir = tmp_path / "runs" / "cls"
    write_fake_finetuning_workdir(workdir)
    before = _files(workdir)
    output = workdir if where == "same" else tmp_path / "runs"
    assert main(["export", "--workdir", str(workdir), "--output", str(output), "--overwrite"]) == 2
    assert f"Export directory {output} holds the source {workdir}" in capsys.readouterr().err
    assert _files(workdir) == before


def test_an_output_that_is_a_file_is_refused(backbone_export, tmp_path, capsys):
    (tmp_path / "export").write_text("a file")
    assert main(["export", "--preset", backbone_export[0], "--output", str(tmp_path / "export")]) == 2
    assert f"Export directory {tmp_path / 'export'} is a file" in capsys.readouterr().err
