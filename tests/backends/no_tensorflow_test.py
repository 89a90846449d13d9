"""The model path without TensorFlow (keras-hub's rule): imports, numbers, generation and the one-line errors.

Where TensorFlow is not installed (CI's venv without it, pass 4 of `.ci/run`) these tests run
directly on `KERAS_BACKEND` (JAX there). Where it is installed (the default TensorFlow test run)
other tests run instead: the shipped reference is checked against what TensorFlow computes now,
and this file runs again in a fresh JAX process, and a PyTorch one, whose import finders find no
`tensorflow*` module, so the default run guards the rule too.

The reference (`tests/testdata/no_tensorflow/`): a tiny backbone preset, task heads and the
outputs TensorFlow computed for them, written by
`KERAS_BACKEND=tensorflow python -m tests.backends.no_tensorflow_test --write-reference`.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.backends.backend_harness import backend_available

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFERENCE_DIR = os.path.join(REPOSITORY, "tests", "testdata", "no_tensorflow")
PRESET_DIR = os.path.join(REFERENCE_DIR, "preset")
REFERENCE_FILE = os.path.join(REFERENCE_DIR, "reference.npz")
NUM_CLASSES = 3
NEW_TOKENS = 4
# Float32 on CPU: the backends differ by rounding only, and so do two TensorFlow processes whose
# kernels split the work over a different number of threads (about 1e-6 apart).
TOLERANCE = 1e-5

# Run first in the blocked process (`python -c BLOCKER + ...`): every `tensorflow*` module is as if not installed.
# Each import finder is wrapped to find none of them, so `import tensorflow` raises ModuleNotFoundError and
# `importlib.util.find_spec("tensorflow")` is None, which libraries probe (torch's dynamo, keras-hub).
BLOCKER = """
import sys


class _WithoutTensorFlow:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0].startswith("tensorflow"):
            return None
        find = getattr(self.finder, "find_spec", None)
        return None if find is None else find(name, path, target)

    def __getattr__(self, name):
        return getattr(self.finder, name)


sys.meta_path[:] = [_WithoutTensorFlow(finder) for finder in sys.meta_path]
"""


TENSORFLOW_INSTALLED = backend_available("tensorflow")


def _config():
    from xlnet_tf.models.xlnet_config import XLNetConfig

    return XLNetConfig(vocabulary_size=40, num_layers=2, num_heads=2, head_dim=4, hidden_dim=8,
                       intermediate_dim=16, dropout=0.0, attention_dropout=0.0,
                       # Large weights: the backbone, not the LM bias alone, picks the generated tokens.
                       initializer_range=0.5)


def _inputs(reference):
    return {name: reference[name] for name in ("token_ids", "segment_ids", "padding_mask")}


def _prompts(reference):
    return {"token_ids": reference["prompt_token_ids"], "padding_mask": reference["prompt_padding_mask"]}


def _head_weights(model, backbone):
    """`{path: variable}` of the weights `model` adds to `backbone`."""
    inside = {id(weight) for weight in backbone.weights}
    return {weight.path: weight for weight in model.weights if id(weight) not in inside}


def _set_head_weights(model, backbone, reference, prefix):
    heads = _head_weights(model, backbone)
    stored = {key[len(prefix):]: reference[key] for key in reference.files if key.startswith(prefix)}
    assert sorted(heads) == sorted(stored), f"{prefix} weights: model {sorted(heads)}, reference {sorted(stored)}"
    for path, weight in heads.items():
        weight.assign(stored[path])


def reference_models(reference):
    """The backbone (from the shipped preset), a classifier, a pretrainer and a causal LM with the stored heads."""
    from xlnet_tf import XLNetBackbone, XLNetCausalLM, XLNetClassifier, XLNetPretrainer

    backbone = XLNetBackbone.from_preset(PRESET_DIR)
    classifier = XLNetClassifier(backbone, num_classes=NUM_CLASSES, dropout=0.0, preprocessor=None)
    pretrainer = XLNetPretrainer(backbone)
    causal_lm = XLNetCausalLM(backbone, mode="exact")
    for model, prefix in ((classifier, "classifier/"), (pretrainer, "pretrainer/"), (causal_lm, "causal_lm/")):
        model(_inputs(reference))  # builds the heads
        _set_head_weights(model, backbone, reference, prefix)
    return backbone, classifier, pretrainer, causal_lm


def called_outputs(models, reference):
    """The backbone's, the classifier's and the pretrainer's outputs, called on the reference's token ids."""
    import keras

    backbone, classifier, pretrainer, _ = models
    inputs = _inputs(reference)
    return {"sequence_output": keras.ops.convert_to_numpy(backbone(inputs)["sequence_output"]),
            "classifier_logits": keras.ops.convert_to_numpy(classifier(inputs)),
            "pretrainer_logits": keras.ops.convert_to_numpy(pretrainer(inputs)["logits"])}


def predicted_outputs(models, reference):
    """`XLNetClassifier.predict` on the reference's token ids (keras-hub's `Task.predict`, no preprocessor)."""
    return {"classifier_logits": models[1].predict(_inputs(reference), batch_size=2, verbose=0)}


def generated_outputs(models, reference):
    """`XLNetCausalLM.generate` on the reference's id prompts, greedy, in both modes."""
    outputs = {}
    for mode in ("exact", "cached"):
        generated = models[3].generate(_prompts(reference), max_new_tokens=NEW_TOKENS, stop_token_ids=None,
                                       sampler="greedy", mode=mode)
        outputs[f"generated_{mode}_token_ids"] = generated["token_ids"]
        outputs[f"generated_{mode}_padding_mask"] = generated["padding_mask"]
    return outputs


def computed_outputs(reference):
    """Every output the reference holds, computed on this process' backend from the shipped weights."""
    models = reference_models(reference)
    return {**called_outputs(models, reference), **generated_outputs(models, reference)}


def write_reference():
    """Writes the preset and `reference.npz` on TensorFlow (run by hand when the model's numbers change on purpose)."""
    import keras

    from xlnet_tf import XLNetBackbone, XLNetCausalLM, XLNetClassifier, XLNetPretrainer

    assert keras.config.backend() == "tensorflow", "the reference is TensorFlow's: KERAS_BACKEND=tensorflow"
    keras.utils.set_random_seed(7)
    rng = np.random.default_rng(7)
    config = _config()
    backbone = XLNetBackbone(config)
    segment_ids = np.array([[0, 0, 0, 1, 1, 2], [0, 0, 1, 1, 1, 2]], "int32")
    arrays = {"token_ids": rng.integers(10, config.vocabulary_size, (2, 6)).astype("int32"),
              "segment_ids": segment_ids,
              "padding_mask": np.array([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]], "int32"),
              # Left-padded prompts of different lengths, continued NEW_TOKENS tokens.
              "prompt_token_ids": np.array([[0, 0, 21, 22, 23], [31, 12, 13, 14, 15]], "int32"),
              "prompt_padding_mask": np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], "int32")}
    inputs = {name: arrays[name] for name in ("token_ids", "segment_ids", "padding_mask")}
    backbone(inputs)
    models = {"classifier/": XLNetClassifier(backbone, num_classes=NUM_CLASSES, dropout=0.0, preprocessor=None),
              "pretrainer/": XLNetPretrainer(backbone), "causal_lm/": XLNetCausalLM(backbone, mode="exact")}
    for prefix, model in models.items():
        model(inputs)
        for path, weight in _head_weights(model, backbone).items():
            # Biases start at zero: random ones make the check see them.
            value = rng.normal(0.0, 0.5, weight.shape).astype("float32")
            weight.assign(value)
            arrays[prefix + path] = value
    os.makedirs(REFERENCE_DIR, exist_ok=True)
    backbone.save_to_preset(PRESET_DIR)
    os.remove(os.path.join(PRESET_DIR, "metadata.json"))  # a date and versions: noise in the fixture
    temporary = REFERENCE_FILE + ".tmp.npz"
    np.savez(temporary, **arrays)
    with np.load(temporary) as reference:
        arrays.update(computed_outputs(reference))
    np.savez(REFERENCE_FILE, **arrays)
    os.remove(temporary)
    return REFERENCE_FILE


def _one_line_error(call):
    """The message of the `ImportError` that `call()` raises; it must be one line naming TensorFlow."""
    try:
        call()
    except ImportError as error:
        message = str(error)
        assert "\n" not in message, message
        assert "needs TensorFlow (pip install tensorflow)" in message, message
        return message
    raise AssertionError(f"{call} ran without TensorFlow; it should raise the one-line error")


if TENSORFLOW_INSTALLED:

    def test_the_reference_is_what_tensorflow_computes():
        import keras

        assert keras.config.backend() == "tensorflow"
        with np.load(REFERENCE_FILE) as reference:
            models = reference_models(reference)
            outputs = {**called_outputs(models, reference), **generated_outputs(models, reference)}
            predicted = predicted_outputs(models, reference)["classifier_logits"]
            for key, value in outputs.items():
                np.testing.assert_allclose(value, reference[key], rtol=0, atol=TOLERANCE, err_msg=key)
            np.testing.assert_allclose(predicted, reference["classifier_logits"], rtol=0, atol=TOLERANCE)

    # CI's no-TensorFlow venv (.ci/run pass 4) runs this file on JAX directly; here, with `-m large`, it
    # reruns itself on JAX and PyTorch with TensorFlow blocked.
    @pytest.mark.subprocess
    @pytest.mark.large
    @pytest.mark.parametrize("backend", [backend for backend in ("jax", "torch") if backend_available(backend)])
    def test_the_model_path_runs_in_a_process_without_tensorflow(backend):
        script = BLOCKER + (
            "import pytest\n"
            f"sys.exit(pytest.main([{__file__!r}, '-q', '-p', 'no:cacheprovider', '--noconftest', "
            "'-o', 'addopts=', '-W', 'ignore::DeprecationWarning']))\n")
        # Not the settings of this pytest process (an xdist worker's, PYTEST_ADDOPTS) for the one it starts.
        environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
        environment.update(KERAS_BACKEND=backend, CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu",
                           PYTHONPATH=REPOSITORY + os.pathsep + os.environ.get("PYTHONPATH", ""))
        result = subprocess.run([sys.executable, "-c", script], cwd=REPOSITORY, env=environment,
                                capture_output=True, text=True, timeout=900)
        output = result.stdout + result.stderr
        assert result.returncode == 0, "\n".join(output.splitlines()[-60:])
        assert " passed" in output and " failed" not in output and " skipped" not in output, output[-3000:]

else:

    def test_tensorflow_is_not_importable_here():
        for name in ("tensorflow", "tensorflow_text"):
            try:
                __import__(name)
            except ImportError:
                continue
            raise AssertionError(f"{name} imported: this process should run without TensorFlow")

    def test_the_package_and_the_model_classes_import():
        import keras

        import xlnet_tf
        from xlnet_tf.layers import relative_attention, xlnet_block  # noqa: F401 - importing is the check
        from xlnet_tf.samplers import seeded_top_k_sampler  # noqa: F401 - importing is the check

        assert keras.config.backend() == os.environ.get("KERAS_BACKEND", "jax") != "tensorflow"
        for name in ("XLNetConfig", "XLNetBackbone", "XLNetPretrainer", "XLNetClassifier", "XLNetSpanLabeler",
                     "XLNetMultipleChoice", "XLNetTokenClassifier", "XLNetCausalLM"):
            assert isinstance(getattr(xlnet_tf, name), type), name
        assert "tensorflow" not in sys.modules

    def test_without_tensorflow_the_default_backend_is_jax():
        environment = {key: value for key, value in os.environ.items() if key != "KERAS_BACKEND"}
        environment["PYTHONPATH"] = REPOSITORY + os.pathsep + os.environ.get("PYTHONPATH", "")
        script = BLOCKER + "import xlnet_tf, keras\nprint(keras.config.backend())\n"
        result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.split()[-1] == "jax"

    def test_a_backbone_built_from_a_config_runs_with_the_right_shapes():
        import keras

        from xlnet_tf import XLNetBackbone

        config = _config()
        backbone = XLNetBackbone(config)
        with np.load(REFERENCE_FILE) as reference:
            sequence_output = keras.ops.convert_to_numpy(backbone(_inputs(reference))["sequence_output"])
        assert sequence_output.shape == (2, 6, config.hidden_dim)  # [B, L, H]
        assert np.isfinite(sequence_output).all()

    def _without_tensorflow(compute):
        with np.load(REFERENCE_FILE) as reference:
            outputs = compute(reference_models(reference), reference)
            expected = {key: reference[key] for key in outputs}
        assert "tensorflow" not in sys.modules
        return outputs, expected

    def test_the_backbone_pretrainer_and_classifier_compute_tensorflows_numbers():
        outputs, expected = _without_tensorflow(called_outputs)
        assert outputs["sequence_output"].shape == (2, 6, 8)  # [B, L, H]
        assert outputs["classifier_logits"].shape == (2, NUM_CLASSES)
        assert outputs["pretrainer_logits"].shape == (2, 6, 40)  # [B, L, V]
        for key, value in outputs.items():
            np.testing.assert_allclose(value, expected[key], rtol=0, atol=TOLERANCE, err_msg=key)

    def test_a_task_model_predicts_on_token_ids():
        outputs, expected = _without_tensorflow(predicted_outputs)
        np.testing.assert_allclose(outputs["classifier_logits"], expected["classifier_logits"], rtol=0,
                                   atol=TOLERANCE)

    def _tiny_classifier(preprocessor=None):
        import keras

        from xlnet_tf import XLNetBackbone, XLNetClassifier

        keras.utils.set_random_seed(3)
        return XLNetClassifier(XLNetBackbone(_config()), num_classes=NUM_CLASSES, dropout=0.0,
                               preprocessor=preprocessor)

    def test_a_task_model_fits_evaluates_and_predicts_on_token_ids():
        import keras

        classifier = _tiny_classifier()
        # No warmup, so both steps move the weights.
        classifier.compile(learning_rate=1e-2, warmup_steps=0, train_steps=2)
        with np.load(REFERENCE_FILE) as reference:
            features = {key: np.concatenate([value, value]) for key, value in _inputs(reference).items()}  # [4, L]
        labels = np.array([0, 1, 2, 1], "int32")
        before = [keras.ops.convert_to_numpy(weight) for weight in classifier.trainable_weights]
        history = classifier.fit(features, labels, batch_size=2, epochs=1, shuffle=False, verbose=0)
        assert int(keras.ops.convert_to_numpy(classifier.optimizer.iterations)) == 2
        assert len(history.history["loss"]) == 1 and np.isfinite(history.history["loss"][0])
        after = [keras.ops.convert_to_numpy(weight) for weight in classifier.trainable_weights]
        assert any(not np.array_equal(old, new) for old, new in zip(before, after))
        logits = classifier.predict(features, batch_size=2, verbose=0)
        assert logits.shape == (4, NUM_CLASSES)  # [B, C]
        assert np.isfinite(logits).all()
        np.testing.assert_allclose(logits[2:], logits[:2], rtol=0, atol=TOLERANCE)  # the same rows, batch by batch
        # evaluate's loss is the cross-entropy of predict's logits (two batches of two: their mean).
        shifted = logits - logits.max(axis=1, keepdims=True)
        cross_entropy = np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(4), labels]  # [B]
        result = classifier.evaluate(features, labels, batch_size=2, verbose=0, return_dict=True)
        np.testing.assert_allclose(result["loss"], cross_entropy.mean(), rtol=1e-5)
        assert "tensorflow" not in sys.modules

    def test_raw_text_raises_one_line_naming_tensorflow():
        from xlnet_tf import XLNetClassifierPreprocessor, XLNetTokenizer
        from xlnet_tf.tensorflow_required import TensorFlowRequiredError

        preprocessor = XLNetClassifierPreprocessor(XLNetTokenizer(proto=None), sequence_length=8)
        classifier = _tiny_classifier(preprocessor)
        texts = ["A fine film.", "A dull film."]
        calls = {"fit": lambda: classifier.fit(texts, [1, 0], verbose=0),
                 "evaluate": lambda: classifier.evaluate((texts, texts), [1, 0], verbose=0),
                 "predict": lambda: classifier.predict(np.array(texts), verbose=0)}
        for method, call in calls.items():
            message = _one_line_error(call)
            assert message.startswith(f"XLNetClassifier.{method} on raw text needs TensorFlow"), message
            assert "XLNetClassifierPreprocessor" in message and "token_ids" in message, message
        try:
            classifier.predict(texts, verbose=0)
        except TensorFlowRequiredError as error:
            assert error.missing == "tensorflow"
        # Packed ids for the same model still run: only the text needs TensorFlow.
        with np.load(REFERENCE_FILE) as reference:
            assert classifier.predict(_inputs(reference), verbose=0).shape == (2, NUM_CLASSES)  # [B, C]
        assert "tensorflow" not in sys.modules

    def test_the_causal_lm_generates_tensorflows_tokens():
        outputs, expected = _without_tensorflow(generated_outputs)
        for key, value in outputs.items():
            np.testing.assert_array_equal(value, expected[key], err_msg=key)

    def test_the_tensorflow_parts_raise_one_line_naming_tensorflow():
        import importlib

        import xlnet_tf
        from xlnet_tf.storage import preset_io
        from xlnet_tf.preprocessing import batch_size_check

        message = _one_line_error(lambda: importlib.import_module("xlnet_tf.data.pretraining"))
        assert message.startswith("xlnet_tf.data.pretraining needs TensorFlow"), message
        assert _one_line_error(lambda: importlib.import_module("xlnet_tf.serving.export_pretrained")).startswith(
            "xlnet_tf.serving")
        _one_line_error(lambda: xlnet_tf.export_pretrainer)
        assert "gs://bucket/preset" in _one_line_error(lambda: preset_io.exists("gs://bucket/preset/config.json"))
        # A data-side module the models import: it imports, and its first use of TensorFlow names it.
        message = _one_line_error(lambda: batch_size_check.same_batch_size(
            "XLNetPacker", {"text_a": np.zeros((2, 3)), "text_b": np.zeros((2, 3))}))
        assert message.startswith("xlnet_tf.preprocessing.batch_size_check needs TensorFlow"), message

    def test_local_presets_are_read_and_written_with_plain_file_io(tmp_path):
        import keras

        from xlnet_tf import XLNetBackbone
        from xlnet_tf.storage import atomic_files, preset_io

        assert atomic_files.gfile(str(tmp_path)) is atomic_files.LocalFiles
        backbone = XLNetBackbone.from_preset(PRESET_DIR)
        backbone.save_to_preset(str(tmp_path / "copy"))
        assert preset_io.read_backbone_config(str(tmp_path / "copy")) == preset_io.read_backbone_config(PRESET_DIR)
        again = XLNetBackbone.from_preset(str(tmp_path / "copy"))
        for saved, loaded in zip(backbone.weights, again.weights):
            np.testing.assert_array_equal(keras.ops.convert_to_numpy(saved), keras.ops.convert_to_numpy(loaded),
                                          err_msg=saved.path)
        assert "tensorflow" not in sys.modules


if __name__ == "__main__":
    if "--write-reference" in sys.argv:
        print(write_reference())
