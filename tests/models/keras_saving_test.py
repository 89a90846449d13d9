"""`.keras` saving of every public model: every weight comes back, in a fresh process, with no
`custom_objects`; registration of every Keras class; light imports stay light."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from xlnet_tf import _keras_registration
from tests.harness import tiny_config
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_classifier import XLNetClassifier
from xlnet_tf.models.xlnet_multiple_choice import XLNetMultipleChoice
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler
from xlnet_tf.models.xlnet_token_classifier import XLNetTokenClassifier
from xlnet_tf.preprocessing.xlnet_packer import XLNetPacker

B, L = 2, 6
# bi_data and memory on: the saved config must carry them (a bi_data backbone needs even batches).
CONFIG = tiny_config(dropout=0.1, attention_dropout=0.1, memory_length=4, bi_data=True,
                     untie_relative_bias=True)
TASK_CONFIG = CONFIG.replace(bi_data=False, memory_length=0)
WARNING_WORDS = ("skipping", "not built", "never built", "could not be loaded", "mismatch")


def _features(rng, shape=(B, L)):
    token_ids = rng.integers(9, 40, shape).astype("int32")
    token_ids[..., -1] = 3  # <cls> last
    segment_ids = np.zeros(shape, "int32")
    segment_ids[..., -1] = 2
    padding_mask = np.ones(shape, "int32")
    padding_mask[..., 0, :2] = 0  # left padding in the first row (of the first choice)
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def _cases(rng):
    """(name, model, inputs) for every public model class."""
    plain = _features(rng)
    pretraining = dict(plain, perm_mask=(rng.random((B, L, L)) < 0.3).astype("float32"),
                       target_mapping=np.eye(L, dtype="float32")[None, :3].repeat(B, 0),
                       mems=rng.normal(size=(B, CONFIG.num_layers, 3, CONFIG.hidden_dim)).astype("float32"))
    task_backbone = lambda: XLNetBackbone(TASK_CONFIG)  # noqa: E731
    return [
        ("backbone", XLNetBackbone(CONFIG), pretraining),
        ("pretrainer", XLNetPretrainer(XLNetBackbone(CONFIG)), pretraining),
        ("classifier", XLNetClassifier(task_backbone(), num_classes=3), plain),
        ("regression", XLNetClassifier(task_backbone(), num_classes=1), plain),
        ("span_labeler", XLNetSpanLabeler(task_backbone(), start_n_top=3, end_n_top=2), plain),
        ("multiple_choice", XLNetMultipleChoice(task_backbone()), _features(rng, (B, 3, L))),
        ("token_classifier", XLNetTokenClassifier(task_backbone(), num_classes=4), plain),
    ]


def _perturb(model, rng):
    """Moves every weight away from any fresh initialisation (zeros, ones, random)."""
    for variable in model.weights:
        value = keras.ops.convert_to_numpy(variable)
        variable.assign(value + rng.normal(scale=0.5, size=value.shape).astype(value.dtype))


def _as_numpy(outputs):
    if isinstance(outputs, dict):
        return {k: np.asarray(v) for k, v in outputs.items()}
    return {"output": np.asarray(outputs)}


LOAD_SCRIPT = textwrap.dedent("""
    import json, os, sys, warnings
    import numpy as np
    import xlnet_tf
    import keras

    directory = sys.argv[1]
    result = {}
    for name in json.load(open(os.path.join(directory, "cases.json"))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = keras.saving.load_model(os.path.join(directory, name + ".keras"))
        inputs = dict(np.load(os.path.join(directory, name + ".inputs.npz")))
        outputs = model(inputs, training=False)
        outputs = outputs if isinstance(outputs, dict) else {"output": outputs}
        np.savez(os.path.join(directory, name + ".loaded.npz"),
                 **{k: np.asarray(v) for k, v in outputs.items()})
        result[name] = {"class": type(model).__name__, "built": model.built,
                        "weights": len(model.weights),
                        "warnings": [str(w.message) for w in caught]}
    print("RESULT " + json.dumps(result))
""")


@pytest.mark.subprocess
def test_every_model_round_trips_through_keras_file_in_a_fresh_process(tmp_path):
    rng = np.random.default_rng(0)
    cases = _cases(rng)
    expected = {}
    for name, model, inputs in cases:
        _perturb(model, rng)
        expected[name] = (type(model).__name__, len(model.weights), _as_numpy(model(inputs, training=False)))
        model.save(str(tmp_path / f"{name}.keras"))
        np.savez(tmp_path / f"{name}.inputs.npz", **inputs)
    (tmp_path / "cases.json").write_text(json.dumps([name for name, _, _ in cases]))

    # No PYTHONPATH entry for the checkout: the installed package is what a user imports.
    result = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, str(tmp_path)], capture_output=True,
                            text=True, timeout=300, cwd=str(tmp_path),
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    loaded = json.loads(lines[-1][len("RESULT "):])
    assert not [line for line in result.stderr.lower().splitlines()
                if any(word in line for word in WARNING_WORDS)], result.stderr[-3000:]
    for name, (class_name, num_weights, outputs) in expected.items():
        info = loaded[name]
        assert info["class"] == class_name and info["built"], (name, info)
        assert info["weights"] == num_weights, (name, info)
        assert not [w for w in info["warnings"] if any(word in w.lower() for word in WARNING_WORDS)], \
            (name, info["warnings"])
        got = dict(np.load(tmp_path / f"{name}.loaded.npz"))
        assert sorted(got) == sorted(outputs), name
        for key, value in outputs.items():
            np.testing.assert_allclose(got[key], value, atol=1e-6, rtol=0, err_msg=f"{name}/{key}")


def test_task_get_config_round_trips_with_the_backbone_serialized():
    model = XLNetSpanLabeler(XLNetBackbone(TASK_CONFIG), start_n_top=3, end_n_top=2, dropout=0.2)
    config = model.get_config()
    assert config["backbone"]["registered_name"] == "xlnet_tf>XLNetBackbone"
    restored = XLNetSpanLabeler.from_config(config)
    assert restored.get_config() == config
    assert restored.built and len(restored.weights) == len(model.weights)
    assert [tuple(w.shape) for w in restored.weights] == [tuple(w.shape) for w in model.weights]


def test_task_from_config_names_the_missing_backbone():
    with pytest.raises(ValueError, match="XLNetClassifier.from_config needs `backbone`"):
        XLNetClassifier.from_config({"num_classes": 2})


def test_packer_round_trips_through_get_config():
    packer = XLNetPacker(sequence_length=9, truncate="keep_second", second_max_length=3, name="pack")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(packer))
    assert isinstance(restored, XLNetPacker) and restored.get_config() == packer.get_config()
    segments = (np.array([[10, 11, 12, 13]], "int32"), np.array([[20, 21, 22, 23, 24]], "int32"))
    for key, value in packer(segments).items():
        np.testing.assert_array_equal(restored(segments)[key], value)


def test_registry_lists_exactly_the_decorated_classes():
    import importlib
    import pkgutil

    import xlnet_tf

    # Every module of the package, so a decorated class missing from KERAS_CLASSES shows up.
    for module in pkgutil.walk_packages(xlnet_tf.__path__, "xlnet_tf."):
        if module.name.rsplit(".", 1)[-1] == "__main__":
            continue  # `python -m` entry points run their command when imported; they define no class.
        importlib.import_module(module.name)

    registered = {name.split(">", 1)[1]: value
                  for name, value in keras.saving.get_custom_objects().items()
                  if name.startswith("xlnet_tf>")}
    assert sorted(registered) == sorted(_keras_registration.KERAS_CLASSES)
    for name, value in registered.items():
        assert isinstance(value, type), f"{name} is still deferred after its module was imported"
        assert value.__module__ == _keras_registration.KERAS_CLASSES[name], name
        assert keras.saving.get_registered_name(value) == f"xlnet_tf>{name}"


def test_deferred_class_imports_its_module_and_delegates():
    deferred = _keras_registration.DeferredClass("XLNetPacker", "xlnet_tf.preprocessing.xlnet_packer")
    assert deferred.resolve() is XLNetPacker
    packer = deferred.from_config(XLNetPacker(7).get_config())
    assert isinstance(packer, XLNetPacker) and packer.sequence_length == 7


@pytest.mark.subprocess
def test_light_modules_do_not_load_keras_and_keras_import_registers():
    script = textwrap.dedent("""
        import sys
        import xlnet_tf.text_normalization
        light = not any(m in sys.modules for m in ("keras", "tensorflow", "xlnet_tf.models"))
        import keras
        registered = keras.saving.get_registered_object("xlnet_tf>XLNetClassifier")
        print(light, type(registered).__name__, "xlnet_tf.models" in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-2000:]
    # Light before Keras; after it, a stand-in that has not imported the models yet.
    assert result.stdout.split()[-3:] == ["True", "DeferredClass", "False"]


def test_install_registers_at_once_when_keras_is_already_loaded(monkeypatch):
    """`import keras` before `import xlnet_tf`: stand-ins go in right away, never over a class."""
    import types

    registry = {"xlnet_tf>XLNetPacker": XLNetPacker}
    fake_keras = types.SimpleNamespace(saving=types.SimpleNamespace(get_custom_objects=lambda: registry))
    monkeypatch.setitem(sys.modules, "keras", fake_keras)
    hooks_before = list(sys.meta_path)
    _keras_registration.install()
    assert sys.meta_path == hooks_before  # no import hook needed
    assert sorted(registry) == sorted(f"xlnet_tf>{n}" for n in _keras_registration.KERAS_CLASSES)
    assert registry["xlnet_tf>XLNetPacker"] is XLNetPacker
    deferred = registry["xlnet_tf>XLNetClassifier"]
    assert isinstance(deferred, _keras_registration.DeferredClass) and deferred.resolve() is XLNetClassifier
