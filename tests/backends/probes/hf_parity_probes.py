"""Probes of the Hugging Face parity fixtures (`tests/testdata/hf_parity/`) on each Keras backend.

The TensorFlow run converts each fixture's checkpoint with the `transformers`
converter and saves the pretrainer as a preset into `workdir/hf_parity/<case>`;
every backend loads those presets and runs the fixture's segments (segment k
reads the memory the model itself wrote for segment k-1, as
`tests/models/hf_parity_test.py` does on TensorFlow), so
`tests/backends/hf_parity_backend_test.py` holds each backend to Hugging Face's
outputs with TensorFlow's tolerance.
"""

import os

import numpy as np
from keras import ops

from tests.models.hf_parity_test import CASES, FIXTURES, load_segments
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

OUTPUT_KEYS = ("logits", "sequence_output", "query_output", "new_mems")


def _preset(workdir, backend, case):
    preset = os.path.join(workdir, "hf_parity", case)
    if not os.path.exists(os.path.join(preset, "config.json")):
        if backend != "tensorflow":
            raise FileNotFoundError(f"the TensorFlow run converts the fixtures first; missing {preset}")
        from xlnet_tf.convert.transformers_checkpoint import convert_transformers_checkpoint

        pretrainer, _, _ = convert_transformers_checkpoint(os.path.join(FIXTURES, case))
        pretrainer.save_to_preset(preset)
    return preset


def probe_hf_parity(workdir, backend):
    """`{"<case>.seg<k>.<output>": array}` of every fixture case's segments."""
    results = {}
    for case in CASES:
        pretrainer = XLNetPretrainer.from_preset(_preset(workdir, backend, case))
        memory = None
        for k, (inputs, _) in enumerate(load_segments(case)):
            if k > 0 and memory is not None:
                inputs = dict(inputs, mems=memory)
            outputs = pretrainer(inputs, training=False)
            for key in OUTPUT_KEYS:
                if key in outputs:
                    results[f"{case}.seg{k}.{key}"] = np.asarray(ops.convert_to_numpy(outputs[key]))
            memory = outputs.get("new_mems")
    return results
