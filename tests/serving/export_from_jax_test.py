"""A pretrainer trained on JAX exports (through a TensorFlow-backend process) a SavedModel that TensorFlow serves
with the JAX model's outputs."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401 - registers the SentencePiece op the generate signature uses

from tests.backends.backend_harness import REPOSITORY, backend_available

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")

# On JAX: a tiny pretrainer takes two training steps, is exported with its vocabulary (so the SavedModel has the
# `generate` signature too), and its backbone's sequence output on fixed ids is saved for the comparison.
_TRAIN_AND_EXPORT_ON_JAX = """
import json, sys
import keras
import numpy as np
from tests.harness import tiny_config, tiny_two_stream_inputs
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.serving.export_pretrained import export_pretrainer

assert keras.config.backend() == "jax", keras.config.backend()
output_dir, vocabulary, token_ids_path, expected_path = sys.argv[1:]
keras.utils.set_random_seed(3)
config = tiny_config(vocabulary_size=200)
pretrainer = XLNetPretrainer(XLNetBackbone(config))
pretrainer.compile(optimizer=keras.optimizers.AdamW(learning_rate=1e-2))
batch = tiny_two_stream_inputs(config, batch_size=4, sequence_length=8, num_predict=3, seed=0, memory_length=0)
rng = np.random.default_rng(1)
batch["target_ids"] = rng.integers(9, 200, (4, 3)).astype("int32")
batch["target_mask"] = np.ones((4, 3), "float32")
pretrainer.fit(batch, batch_size=4, epochs=2, verbose=0)
paths = export_pretrainer(pretrainer, output_dir, vocabulary=vocabulary, generation={"mode": "cached"})
token_ids = np.load(token_ids_path)
outputs = pretrainer.backbone({"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
                               "padding_mask": np.ones_like(token_ids)})
np.save(expected_path, keras.ops.convert_to_numpy(outputs["sequence_output"]))
print(json.dumps(paths))
"""


@pytest.mark.subprocess
@pytest.mark.large
@pytest.mark.skipif(not backend_available("jax"), reason="JAX is a test extra")
def test_a_jax_trained_pretrainer_exports_a_savedmodel_tensorflow_serves_with_its_outputs(tmp_path):
    token_ids = np.random.default_rng(0).integers(9, 200, (2, 7)).astype("int32")
    np.save(tmp_path / "token_ids.npy", token_ids)
    environment = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2",
                       PYTHONPATH=REPOSITORY + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run(
        [sys.executable, "-c", _TRAIN_AND_EXPORT_ON_JAX, str(tmp_path / "export"),
         os.path.join(TESTDATA, "tiny_spiece.model"), str(tmp_path / "token_ids.npy"), str(tmp_path / "expected.npy")],
        cwd=REPOSITORY, env=environment, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    paths = json.loads(result.stdout.strip().splitlines()[-1])
    assert os.path.exists(os.path.join(paths["preset"], "lm_head.weights.h5"))

    served = tf.saved_model.load(paths["saved_model"])
    assert {"serving_default", "encode", "generate"} <= set(served.signatures)
    sequence_output = served.signatures["serving_default"](token_ids=tf.constant(token_ids))["sequence_output"]
    np.testing.assert_allclose(sequence_output.numpy(), np.load(tmp_path / "expected.npy"), atol=1e-5, rtol=0)
    continuation = served.signatures["generate"](prompt=tf.constant(["a b"]),
                                                 max_new_tokens=tf.constant(3))["continuation"]
    assert continuation.shape == (1,) and continuation.dtype == tf.string
