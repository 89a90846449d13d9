"""Under mixed_bfloat16 the LM head runs in float32.

Casting a float32 variable to bfloat16 reads and writes the whole weight, and its gradient is cast back:
for the `[V, H]` embedding table of the LM head that cost more than the bfloat16 matmul of the P
prediction rows saved, and the logits over the vocabulary are more accurate in float32.
"""

import keras
import numpy as np
import tensorflow as tf

from tests.harness import tiny_config, tiny_two_stream_inputs
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

CONFIG = tiny_config()


def _casts_of_variables(graph, variables):
    """{variable path: number of Cast ops that read it} in a traced step's graph."""
    paths = {id(variable._value.handle): variable.path for variable in variables}
    names = {internal.op.name: paths.get(id(external), "?") for external, internal in graph.captures}
    nodes = list(graph.as_graph_def().node)
    reads = {node.name: node.input[0].split(":")[0] for node in nodes if node.op == "ReadVariableOp"}
    counts = {}
    for node in nodes:
        source = reads.get(node.input[0].split(":")[0]) if node.op == "Cast" and node.input else None
        if source is not None:
            counts[names[source]] = counts.get(names[source], 0) + 1
    return counts


def test_the_step_never_casts_the_embedding_table():
    keras.utils.set_random_seed(0)
    model = XLNetPretrainer(XLNetBackbone(CONFIG, dtype="mixed_bfloat16"))
    inputs = {k: tf.constant(v) for k, v in tiny_two_stream_inputs(CONFIG).items()}
    variables = model.trainable_variables

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)["logits"]
            loss = tf.reduce_mean(logits)
        return tape.gradient(loss, variables)

    counts = _casts_of_variables(step.get_concrete_function().graph, model.variables)
    # The kernels are cast (the walk finds them); the [V, H] table is not, for the lookup or the head.
    assert any(path.endswith("attention/query_kernel") for path in counts), sorted(counts)
    assert "?" not in counts and not any("token_embedding" in path for path in counts), counts


def test_lm_head_logits_are_float32_products_under_mixed_precision():
    keras.utils.set_random_seed(1)
    model = XLNetPretrainer(XLNetBackbone(CONFIG, dtype="mixed_bfloat16"))
    inputs = tiny_two_stream_inputs(CONFIG)
    outputs = model(inputs)
    hidden = tf.cast(outputs["query_output"], tf.float32)  # [B, P, H], bfloat16 values
    table = model.backbone.token_embedding.embeddings.numpy()  # float32 [V, H]
    expected = np.einsum("bph,vh->bpv", hidden.numpy(), table) + model.lm_bias.numpy()
    assert outputs["logits"].dtype == tf.float32
    np.testing.assert_allclose(outputs["logits"], expected, rtol=1e-5, atol=1e-5)
    # Gradients still reach the tied embedding through the head.
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(inputs)["logits"][..., 5])
    gradient = tape.gradient(loss, model.backbone.token_embedding.embeddings)
    assert gradient is not None and float(tf.reduce_sum(tf.abs(tf.convert_to_tensor(gradient)))) > 0
