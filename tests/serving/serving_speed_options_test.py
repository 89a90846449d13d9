"""Export options for serving latency: padding trimmed before the model, XLA-compiled model call.

Both must leave the answers as they are: trimmed exports equal the model run on every column, XLA exports
equal the plain export (1e-5), and bad input is refused with the same errors.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import CONFIG, LENGTH, SPIECE, make_task_model, tiny_backbone
from tests.serving.input_validation_test import _bad_cases, _call, _valid
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.preprocessing.text_preprocessor import TextPreprocessor
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.serving.export_task_model import METADATA_FILE, _probe_batch, export_task_model
from xlnet_tf.serving.task_serving_module import TaskServingModule

TEXTS = ["a fine film", "", "the quick brown fox jumps over the lazy dog " * 6, "short one"]


def _classifier():
    model = XLNetClassifier(tiny_backbone(), num_classes=3)
    model.build_with_dummy_inputs()
    return model


def _export(root, model, **options):
    tokenizer = XLNetTokenizer(SPIECE)
    path = export_task_model(model, str(root), task="classification", sequence_length=LENGTH,
                             preprocessor=TextPreprocessor(tokenizer, XLNetPacker(LENGTH)),
                             vocabulary=tokenizer.get_vocabulary(), label_names=["a", "b", "c"], **options)
    with open(os.path.join(path, METADATA_FILE)) as f:
        return tf.saved_model.load(path), json.load(f)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """`(model, {"plain": (loaded, metadata), "xla": (loaded, metadata)})` of one XLNet classifier."""
    model = _classifier()
    root = tmp_path_factory.mktemp("speed")
    return model, {"plain": _export(root / "plain", model), "xla": _export(root / "xla", model, jit_compile=True)}


def _short_rows(batch=3):
    """Rows that all start with padding (the longest has 2/3 of the length real)."""
    return _probe_batch(LENGTH, CONFIG["vocabulary_size"], batch_size=batch, shorter=1)


def _np(outputs):
    return {k: v.numpy() for k, v in outputs.items()}


def test_metadata_records_the_options(exports):
    _, found = exports
    assert (found["plain"][1]["trim_padding"], found["plain"][1]["jit_compile"]) == (True, False)
    assert (found["xla"][1]["trim_padding"], found["xla"][1]["jit_compile"]) == (False, True)


def test_trimmed_export_equals_the_model_on_every_column(exports):
    model, found = exports
    loaded = found["plain"][0]
    features = _short_rows()
    expected = model({k: tf.constant(v) for k, v in features.items()}, training=False).numpy()  # [B, 3]
    got = _np(_call(loaded.signatures["serve_token_ids"], features))
    np.testing.assert_allclose(got["logits"], expected, atol=1e-5)
    # One row alone (more columns trimmed) gives its answer in the batch.
    alone = _np(_call(loaded.signatures["serve_token_ids"], {k: v[2:] for k, v in features.items()}))
    np.testing.assert_allclose(alone["logits"], got["logits"][2:], atol=1e-5)


def test_position_heads_are_saved_once_and_never_left_on_the_model(exports):
    model, found = exports
    expected = [h.numpy() for h in model.backbone.project_positions(LENGTH)]
    for export in ("plain", "xla"):
        saved = [v.numpy() for v in found[export][0].position_heads]
        assert len(saved) == CONFIG["num_layers"]
        for got, want in zip(saved, expected):
            np.testing.assert_array_equal(got, want)
    # The serving functions read them while tracing only: the Python model projects as before.
    assert model.backbone.precomputed_position_heads is None


def test_xla_export_equals_the_plain_export(exports):
    _, found = exports
    plain, xla = found["plain"][0], found["xla"][0]
    for features in (_valid(batch=2), _short_rows()):
        expected = _np(_call(plain.signatures["serve_token_ids"], features))
        got = _np(_call(xla.signatures["serve_token_ids"], features))
        np.testing.assert_allclose(got["logits"], expected["logits"], atol=1e-5)
        np.testing.assert_allclose(got["probabilities"], expected["probabilities"], atol=1e-5)
        np.testing.assert_array_equal(got["label"], expected["label"])
    text = tf.constant(TEXTS)
    expected = _np(plain.signatures["serving_default"](text=text))
    got = _np(xla.signatures["serving_default"](text=text))
    np.testing.assert_allclose(got["probabilities"], expected["probabilities"], atol=1e-5)
    np.testing.assert_array_equal(got["label_name"], expected["label_name"])


def test_xla_export_compiles_the_model_call(exports):
    _, found = exports

    def must_compile(loaded):
        graph = loaded.signatures["serve_token_ids"].graph.as_graph_def()
        return any(f.attr["_XlaMustCompile"].b for f in graph.library.function)

    assert must_compile(found["xla"][0]) and not must_compile(found["plain"][0])


@pytest.mark.parametrize("export", ["plain", "xla"])
@pytest.mark.parametrize("name, overrides, pattern", _bad_cases(LENGTH), ids=[c[0] for c in _bad_cases(LENGTH)])
def test_bad_ids_are_refused_with_the_same_errors(exports, export, name, overrides, pattern):
    _, found = exports
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        _call(found[export][0].signatures["serve_token_ids"], {**_valid(), **overrides})


def test_empty_batch_and_all_padding_rows(exports):
    _, found = exports
    signature = found["plain"][0].signatures["serve_token_ids"]
    empty = _call(signature, {k: v[:0] for k, v in _valid().items()})
    assert empty["probabilities"].shape == (0, 3)
    features = _valid()
    features["padding_mask"][:] = 0  # nothing real: only the last column is kept, as the model reads it
    model, _ = exports
    expected = model({k: tf.constant(v) for k, v in features.items()}, training=False).numpy()
    np.testing.assert_allclose(_call(signature, features)["logits"].numpy(), expected, atol=1e-5)


def test_option_errors():
    with pytest.raises(ValueError, match="trim_padding=True needs"):
        TaskServingModule(make_task_model(3), task="classification", sequence_length=32, trim_padding=True)
    with pytest.raises(ValueError, match="pick one"):
        TaskServingModule(_classifier(), task="classification", sequence_length=LENGTH, trim_padding=True,
                          jit_compile=True)
    with pytest.raises(ValueError, match="jit_compile must be a bool"):
        TaskServingModule(_classifier(), task="classification", sequence_length=LENGTH, jit_compile="yes")
    with pytest.raises(ValueError, match="jit_compile=True is for the static-length signatures"):
        TaskServingModule(_classifier(), task="classification", sequence_length=LENGTH, max_segments=2,
                          jit_compile=True)
    # Models that may read absolute positions are never trimmed by default.
    assert not TaskServingModule(make_task_model(3), task="classification", sequence_length=32).trim_padding


def test_cli_passes_the_options_to_a_fine_tuning_export(tmp_path, capsys):
    from xlnet_tf.cli import export

    model = _classifier()
    workdir = tmp_path / "run"
    model.save_to_preset(str(workdir / "final"), vocabulary_file=SPIECE, preprocessing={
        "task_type": "classification", "sequence_length": LENGTH, "text_fields": ["text"],
        "truncate": "longest_first", "label_names": ["a", "b", "c"]})
    (workdir / "config.yaml").write_text("task:\n  task_type: classification\n")  # a fine-tuning run's
    written = {}
    for name, flags in (("default", []), ("xla", ["--jit-compile"]), ("untrimmed", ["--no-trim-padding"])):
        output = tmp_path / name
        assert export.main(["--workdir", str(workdir), "--output", str(output)] + flags) == 0
        with open(output / METADATA_FILE) as f:
            metadata = json.load(f)
        written[name] = (metadata["jit_compile"], metadata["trim_padding"])
    assert written == {"default": (False, True), "xla": (True, False), "untrimmed": (False, False)}
    # Both flags name what they need when the source is not a fine-tuning work directory.
    assert export.main(["--preset", str(workdir / "final"), "--output", str(tmp_path / "x"),
                        "--jit-compile"]) == 2
    assert "--jit-compile and --no-trim-padding need --workdir" in capsys.readouterr().err
