"""Fixtures of the documentation tests: the served presets, the examples' working directory, earlier outputs.

The helpers they use, and what an example may assume, are in `example_context.py`.
"""

import pytest

from tests.docs.example_context import populate_workdir, tiny_release_zip
from tests.presets.conftest import RELEASE_ARCHIVE, publish_hf
from tests.presets.preset_server import PresetServer


@pytest.fixture(scope="module")
def served_presets(tmp_path_factory):
    """Serves the named presets' files on 127.0.0.1 and points the preset code at them (undone after the module)."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("XLNET_TF_HOME", str(tmp_path_factory.mktemp("xlnet_tf_home")))
    with PresetServer() as server:
        server.add_gcs_object("/xlnet/released_models/" + RELEASE_ARCHIVE,
                              tiny_release_zip(str(tmp_path_factory.mktemp("release"))))
        publish_hf(server)
        monkeypatch.setenv("XLNET_TF_RELEASE_BASE_URL", server.url("/xlnet/released_models"))
        monkeypatch.setenv("XLNET_TF_HF_BASE_URL", server.url())
        yield server
    monkeypatch.undo()


@pytest.fixture(scope="module")
def finetuning_run(served_presets, tmp_path_factory):
    """`runs/mrpc`: what `xlnet-tf finetune` leaves for export, its `final/` task preset."""
    from xlnet_tf import XLNetClassifier, finetune_config_from_dict

    run = tmp_path_factory.mktemp("artifacts") / "runs" / "mrpc"
    # What a GLUE MRPC run writes: a sentence-pair classifier and its packing.
    preprocessing = {"task_type": "classification", "sequence_length": 128, "text_fields": ["sentence1", "sentence2"],
                     "label_names": ["not_equivalent", "equivalent"]}
    classifier = XLNetClassifier.from_preset("xlnet_base_cased", num_classes=2)
    classifier.save_to_preset(str(run / "final"), preprocessing=preprocessing)
    config = finetune_config_from_dict({"task": {"dataset": "glue/mrpc"}, "training": {"global_batch_size": 32}})
    (run / "config.yaml").write_text(config.to_yaml(), encoding="utf-8")
    return run


@pytest.fixture(scope="module")
def task_export(finetuning_run, tmp_path_factory):
    """`exports/mrpc/1`: the SavedModel of `finetuning_run` (what `xlnet-tf export` writes)."""
    from xlnet_tf.serving import export_task_workdir

    output = tmp_path_factory.mktemp("artifacts") / "exports" / "mrpc" / "1"
    export_task_workdir(str(finetuning_run), str(output))
    return output


@pytest.fixture
def example_workdir(served_presets, tmp_path, monkeypatch):
    """A fresh working directory with the files the examples name; the presets are served."""
    populate_workdir(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path
