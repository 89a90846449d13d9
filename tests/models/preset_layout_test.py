"""One preset layout, keras-hub's, written by every saver and read by every `from_preset`.

Also: keras-hub's own loaders and `keras_hub.upload_preset` take the directories
(hub clients monkeypatched, no network), `hf://` handles load through the hub's client
(`preset_io.hub_file`), and a directory in another layout is refused naming the file.
"""

import json
import os
import shutil

import h5py
import huggingface_hub
import kagglehub
import keras_hub
import numpy as np
import pytest
from keras_hub.src.utils import preset_utils  # keras-hub's own loader: keras-hub must read our presets

from tests.harness import tiny_config
from xlnet_tf import (XLNetClassifier, XLNetClassifierPreprocessor, XLNetSpanLabeler,
                      XLNetTokenizer)
from xlnet_tf.models.xlnet_config import XLNetConfig
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.models.xlnet_task import load_task_preset
from xlnet_tf.storage import preset_io

SPIECE = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
CONFIG = tiny_config(vocabulary_size=200)
TEXTS = ["A quiet river runs by the mill.", "Rain.", ""]
PRETRAINER_FILES = ["assets/tokenizer/vocabulary.spm", "config.json", "lm_head.weights.h5", "metadata.json",
                    "model.weights.h5", "spiece.model", "tokenizer.json"]
TASK_FILES = ["assets/tokenizer/vocabulary.spm", "config.json", "metadata.json", "model.weights.h5",
              "preprocessing.json", "preprocessor.json", "spiece.model", "task.json", "task.weights.h5",
              "tokenizer.json"]


def listing(directory):
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, _, names in os.walk(directory) for name in names)


def ids_inputs():
    rng = np.random.default_rng(0)
    return {"token_ids": rng.integers(9, 200, (2, 7)).astype("int32"),
            "segment_ids": np.zeros((2, 7), "int32"), "padding_mask": np.ones((2, 7), "int32")}


@pytest.fixture(scope="module")
def pretrainer_preset(tmp_path_factory):
    pretrainer = XLNetPretrainer(XLNetBackbone(CONFIG))
    pretrainer.lm_bias.assign(np.linspace(-1, 1, 200).astype("float32"))
    path = str(tmp_path_factory.mktemp("layout") / "pretrainer")
    pretrainer.save_to_preset(path, vocabulary_file=SPIECE)
    return pretrainer, path


@pytest.fixture(scope="module")
def classifier_preset(tmp_path_factory):
    tokenizer = XLNetTokenizer(SPIECE, lowercase=True)
    model = XLNetClassifier(XLNetBackbone(CONFIG), num_classes=3,
                            preprocessor=XLNetClassifierPreprocessor(tokenizer, sequence_length=16))
    path = str(tmp_path_factory.mktemp("layout") / "classifier")
    model.save_to_preset(path)
    return model, path


def test_pretrainer_preset_is_keras_hubs_layout(pretrainer_preset):
    pretrainer, path = pretrainer_preset
    assert listing(path) == PRETRAINER_FILES
    config = json.load(open(os.path.join(path, "config.json")))
    assert config["registered_name"] == "xlnet_tf>XLNetBackbone"
    assert config["class_name"] == "XLNetBackbone" and config["config"]["config"]["hidden_dim"] == 8
    tokenizer = json.load(open(os.path.join(path, "tokenizer.json")))
    assert tokenizer["registered_name"] == "xlnet_tf>XLNetTokenizer"
    assert tokenizer["config"]["proto"] is None  # the vocabulary is the asset, not inline
    spiece = open(SPIECE, "rb").read()
    assert open(os.path.join(path, "assets", "tokenizer", "vocabulary.spm"), "rb").read() == spiece
    assert json.load(open(os.path.join(path, "metadata.json")))["parameter_count"] == (
        pretrainer.backbone.count_params())
    # Code that reads config.json directly.
    assert XLNetConfig.from_dict(preset_io.read_backbone_config(path)) == pretrainer.backbone.config


def test_every_reader_takes_the_pretrainer_preset(pretrainer_preset):
    pretrainer, path = pretrainer_preset
    inputs = ids_inputs()
    expected = pretrainer(inputs)["logits"].numpy()
    np.testing.assert_allclose(XLNetPretrainer.from_preset(path)(inputs)["logits"].numpy(), expected, atol=1e-6)
    sequence = pretrainer.backbone(inputs)["sequence_output"].numpy()
    for backbone in (XLNetBackbone.from_preset(path), keras_hub.models.Backbone.from_preset(path)):
        assert isinstance(backbone, XLNetBackbone)
        np.testing.assert_allclose(backbone(inputs)["sequence_output"].numpy(), sequence, atol=1e-6)
    reference = XLNetTokenizer(SPIECE)(TEXTS)
    keras_hub_loader = preset_utils.get_preset_loader(path)
    for tokenizer in (XLNetTokenizer.from_preset(path), keras_hub_loader.load_tokenizer(XLNetTokenizer)):
        assert isinstance(tokenizer, XLNetTokenizer)
        assert tokenizer(TEXTS) == reference
    # A task from the pretraining preset: backbone weights, a new head, its preprocessor.
    classifier = XLNetClassifier.from_preset(path, num_classes=2)
    np.testing.assert_allclose(classifier.backbone(inputs)["sequence_output"].numpy(), sequence, atol=1e-6)
    assert isinstance(classifier.preprocessor, XLNetClassifierPreprocessor)


def test_task_preset_round_trips_through_ours_and_keras_hubs_loader(classifier_preset):
    model, path = classifier_preset
    assert listing(path) == TASK_FILES
    task = json.load(open(os.path.join(path, "task.json")))
    assert task["registered_name"] == "xlnet_tf>XLNetClassifier"
    assert task["config"]["backbone"]["registered_name"] == "xlnet_tf>XLNetBackbone"
    assert task["config"]["preprocessor"]["config"]["sequence_length"] == 16
    preprocessor = json.load(open(os.path.join(path, "preprocessor.json")))
    assert preprocessor["config"]["tokenizer"]["config"]["lowercase"] is True
    # task.weights.h5 holds the head only (keras-hub's save_task_weights), no optimizer state.
    with h5py.File(os.path.join(path, "task.weights.h5"), "r") as f:
        stored = []
        f.visit(stored.append)
    assert not any("backbone" in name or "optimizer" in name for name in stored), stored
    expected = model.predict(TEXTS, verbose=0)
    loaded = [XLNetClassifier.from_preset(path), load_task_preset(path),
              preset_utils.get_preset_loader(path).load_task(XLNetClassifier, True, True)]
    for restored in loaded:
        assert restored.preprocessor.sequence_length == 16 and restored.preprocessor.tokenizer.lowercase
        np.testing.assert_allclose(restored.predict(TEXTS, verbose=0), expected, atol=1e-5)


def test_a_preset_of_another_task_class_is_a_clear_error(classifier_preset):
    _, path = classifier_preset
    with pytest.raises(ValueError, match="holds a XLNetClassifier.*not a XLNetSpanLabeler"):
        XLNetSpanLabeler.from_preset(path)


def test_a_new_head_size_keeps_the_backbone_and_starts_a_fresh_head(classifier_preset):
    model, path = classifier_preset
    with pytest.warns(UserWarning, match="num_classes 3 -> 2: the backbone's trained weights are loaded"):
        resized = XLNetClassifier.from_preset(path, num_classes=2)
    assert resized.logits_dense.kernel.shape == (8, 2)
    for got, want in zip(resized.backbone.weights, model.backbone.weights):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert resized.predict(TEXTS, verbose=0).shape == (3, 2)


def test_a_preset_not_in_keras_hubs_layout_is_refused_naming_the_file(classifier_preset, tmp_path):
    # config.json as a plain XLNetConfig dict (what a checkpoint's config looks like before `xlnet-tf convert`).
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps(CONFIG.to_dict()))
    XLNetBackbone(CONFIG).save_weights(str(plain / "model.weights.h5"))
    expected = f"{plain}/config.json is not a preset's config.json .*xlnet-tf convert"
    for load in (XLNetBackbone.from_preset, XLNetPretrainer.from_preset, XLNetClassifier.from_preset):
        with pytest.raises(ValueError, match=expected):
            load(str(plain))
    # task.json that is not a serialized task model.
    _, path = classifier_preset
    task = tmp_path / "task"
    shutil.copytree(path, task)
    saved = json.loads((task / "task.json").read_text())
    del saved["registered_name"]
    (task / "task.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=f"{task}/task.json holds None, not an xlnet_tf>XLNetClassifier"):
        load_task_preset(str(task))


def test_upload_preset_accepts_our_presets(pretrainer_preset, classifier_preset, monkeypatch):
    """keras-hub's checks and model card run on our directories; the hub calls are captured."""
    calls = []

    def upload_folder(repo_id, folder_path):
        card = open(os.path.join(folder_path, "README.md")).read()
        calls.append(("hf", repo_id, folder_path, card))

    monkeypatch.setattr(huggingface_hub, "create_repo",
                        lambda repo_id, exist_ok: type("Url", (), {"repo_id": repo_id})())
    monkeypatch.setattr(huggingface_hub, "file_exists", lambda repo_id, filename: False)
    monkeypatch.setattr(huggingface_hub, "upload_folder", upload_folder)
    monkeypatch.setattr(kagglehub, "model_upload",
                        lambda handle, folder: calls.append(("kaggle", handle, folder, None)))
    _, pretrainer_path = pretrainer_preset
    _, classifier_path = classifier_preset
    keras_hub.upload_preset("hf://someone/xlnet_tiny", pretrainer_path)
    keras_hub.upload_preset("hf://someone/xlnet_tiny_classifier", classifier_path)
    keras_hub.upload_preset("kaggle://someone/xlnet/keras/tiny", pretrainer_path)
    assert [c[:3] for c in calls] == [("hf", "someone/xlnet_tiny", pretrainer_path),
                                       ("hf", "someone/xlnet_tiny_classifier", classifier_path),
                                       ("kaggle", "someone/xlnet/keras/tiny", pretrainer_path)]
    assert "This is a [`XLNet` model]" in calls[0][3] and "* **config:**" in calls[0][3]
    assert "related to a `Classifier` task" in calls[1][3]
    # The generated card is removed again after the upload.
    assert not os.path.exists(os.path.join(pretrainer_path, "README.md"))


def test_hf_handles_load_through_the_hub_client(pretrainer_preset, classifier_preset, monkeypatch):
    from huggingface_hub.utils import EntryNotFoundError

    repos = {"someone/xlnet_tiny": pretrainer_preset[1], "someone/xlnet_tiny_classifier": classifier_preset[1]}
    downloads = []

    def hf_hub_download(repo_id, filename):
        path = os.path.join(repos[repo_id], filename)
        if not os.path.exists(path):
            raise EntryNotFoundError(f"{filename} not in {repo_id}")
        downloads.append((repo_id, filename))
        return path

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    inputs = ids_inputs()
    pretrainer, _ = pretrainer_preset
    backbone = XLNetBackbone.from_preset("hf://someone/xlnet_tiny")
    np.testing.assert_allclose(backbone(inputs)["sequence_output"].numpy(),
                               pretrainer.backbone(inputs)["sequence_output"].numpy(), atol=1e-6)
    np.testing.assert_allclose(XLNetPretrainer.from_preset("hf://someone/xlnet_tiny").lm_bias.numpy(),
                               pretrainer.lm_bias.numpy())
    model, _ = classifier_preset
    restored = XLNetClassifier.from_preset("hf://someone/xlnet_tiny_classifier")
    np.testing.assert_allclose(restored.predict(TEXTS, verbose=0), model.predict(TEXTS, verbose=0), atol=1e-5)
    assert ("someone/xlnet_tiny_classifier", "task.weights.h5") in downloads
    assert ("someone/xlnet_tiny", "lm_head.weights.h5") in downloads
