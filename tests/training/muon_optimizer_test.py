"""Muon's step on the blocks' weight matrices: the arithmetic against a NumPy rule, both update paths,
the variables it takes, AdamW on the rest, the config round trip and the error on a wrong setting."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.training.helpers import as_dataset, compiled_for_batches_of_two, synthetic_batches, tiny_config
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.models.xlnet_backbone import XLNetBackbone
from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
from xlnet_tf.optimizers import build_optimizer
from xlnet_tf.optimizers.all_reduced_adamw import AllReducedAdamW
from xlnet_tf.optimizers.muon_update import orthogonalize
from xlnet_tf.training.run_sections import OptimizerSection, validate_optimizer

SHAPES = {"ffn_kernel": (6, 4), "query_kernel": (8, 2, 3), "bias": (4,)}
MUON = ("ffn_kernel", "query_kernel")


def _variables():
    rng = np.random.default_rng(0)
    variables = []
    for path, shape in SHAPES.items():
        # A Keras variable's path is its name outside a layer.
        variables.append(keras.Variable(rng.standard_normal(shape).astype("float32"), name=path))
    return variables


def _gradients(step):
    rng = np.random.default_rng(10 + step)
    return [tf.constant(rng.standard_normal(shape).astype("float32")) for shape in SHAPES.values()]


def _numpy_orthogonalize(matrix):
    a, b, c = 3.4445, -4.7750, 2.0315
    x = matrix.T if matrix.shape[0] > matrix.shape[1] else matrix
    x = x / (np.linalg.norm(x) + 1e-7)
    for _ in range(5):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if matrix.shape[0] > matrix.shape[1] else x


def _numpy_muon(variables, steps, *, learning_rate, weight_decay, clip):
    """The rule written out: clip by the global norm, decay, Nesterov momentum 0.95, orthogonalise, scale."""
    values = [v.numpy().astype(np.float64) for v in variables]
    momenta = [np.zeros_like(v) for v in values]
    for step in range(steps):
        gradients = [g.numpy().astype(np.float64) for g in _gradients(step)]
        norm = np.sqrt(sum((g ** 2).sum() for g in gradients))
        gradients = [g * min(1.0, clip / norm) for g in gradients]
        for i, path in enumerate(SHAPES):
            if path not in MUON:
                continue
            momenta[i] = 0.95 * momenta[i] + gradients[i]
            direction = (gradients[i] + 0.95 * momenta[i]).reshape(values[i].shape[0], -1)
            update = _numpy_orthogonalize(direction) * 0.2 * np.sqrt(max(direction.shape))
            values[i] = values[i] * (1 - learning_rate * weight_decay) - learning_rate * update.reshape(values[i].shape)
    return values


def _run(fused, steps=3, **settings):
    variables = _variables()
    optimizer = AllReducedAdamW(fused=fused, learning_rate=0.05, weight_decay=0.1, global_clipnorm=1.0,
                                muon_variable_paths=MUON, **settings)
    optimizer.build(variables)
    apply = tf.function(lambda gradients: optimizer.apply(gradients, variables))
    for step in range(steps):
        apply(_gradients(step))
    return optimizer, variables


@pytest.mark.parametrize("fused", [True, False])
def test_muon_step_matches_the_numpy_rule_on_matrices_and_attention_kernels(fused):
    _, variables = _run(fused)
    expected = _numpy_muon(_variables(), 3, learning_rate=0.05, weight_decay=0.1, clip=1.0)
    for path, variable, want in zip(SHAPES, variables, expected):
        if path in MUON:
            np.testing.assert_allclose(variable.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=path)
    # The step really moved them, by about the RMS of an AdamW step (0.2 * lr per coordinate and step).
    for path, variable, start in zip(SHAPES, variables, _variables()):
        if path in MUON:
            rms = np.sqrt(np.mean((variable.numpy() - start.numpy()) ** 2))
            assert 0.01 < rms < 0.05, (path, rms)


def test_the_other_variables_get_adamw_exactly():
    _, with_muon = _run(True)
    variables = _variables()
    plain = AllReducedAdamW(learning_rate=0.05, weight_decay=0.1, global_clipnorm=1.0)
    plain.build(variables)
    apply = tf.function(lambda gradients: plain.apply(gradients, variables))
    for step in range(3):
        apply(_gradients(step))
    np.testing.assert_array_equal(with_muon[2].numpy(), variables[2].numpy())
    assert np.abs(with_muon[0].numpy() - variables[0].numpy()).max() > 1e-3


def test_fused_and_keras_paths_agree():
    _, fused = _run(True)
    _, unfused = _run(False)
    for a, b in zip(fused, unfused):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_orthogonalize_pushes_singular_values_to_one_whatever_the_scale():
    rng = np.random.default_rng(3)
    for shape in ((16, 5), (5, 16), (12, 12)):
        matrix = rng.standard_normal(shape).astype("float32") * np.logspace(-1, 1, shape[1])[None, :]
        result = orthogonalize(tf.constant(matrix)).numpy()
        assert result.shape == shape
        u, values, vt = np.linalg.svd(matrix.astype(np.float64), full_matrices=False)
        # What each singular direction of the input became (the iteration keeps the directions).
        mapped = np.einsum("ik,ij,kj->k", u, result, vt)
        # Directions 20x weaker than the strongest end within a factor of two of 1; none above 1.3.
        assert mapped.max() < 1.3 and mapped[values > values[0] / 20].min() > 0.55, (shape, values, mapped)
        np.testing.assert_allclose(orthogonalize(tf.constant(matrix * 1e3)).numpy(), result, rtol=1e-3, atol=1e-4)
        # The same directions as the exact polar factor U V^T.
        cosine = (result * (u @ vt)).sum() / np.linalg.norm(result) / np.linalg.norm(u @ vt)
        assert cosine > 0.95, cosine


def test_config_round_trip_continues_alike():
    optimizer, variables = _run(True, steps=2)
    config = optimizer.get_config()
    assert config["muon_variable_paths"] == sorted(MUON) and config["muon_momentum"] == 0.95
    restored = AllReducedAdamW.from_config(config)
    copies = [keras.Variable(v.numpy(), name=path) for v, path in zip(variables, SHAPES)]
    restored.build(copies)
    for source, target in zip(optimizer.variables, restored.variables):
        target.assign(source)
    optimizer.apply(_gradients(5), variables)
    restored.apply(_gradients(5), copies)
    for a, b in zip(variables, copies):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


def test_an_unknown_muon_path_is_an_error_naming_it():
    optimizer = AllReducedAdamW(learning_rate=0.1, muon_variable_paths=["missing_kernel"])
    with pytest.raises(ValueError, match="missing_kernel"):
        optimizer.build(_variables())


def test_build_optimizer_gives_muon_the_blocks_kernels_only():
    model = XLNetPretrainer(XLNetBackbone(tiny_config()))
    optimizer = build_optimizer(model, learning_rate=1e-3, warmup_steps=1, train_steps=10, algorithm="muon")
    paths = set(optimizer.muon_variable_paths)
    kernels = {v.path for block in model.backbone.blocks for v in block.trainable_variables
               if v.path.endswith("kernel")}
    # Per block: query, key, value, position and output attention kernels, two feed-forward ones.
    assert paths == kernels and len(paths) == 7 * len(model.backbone.blocks)
    others = [v.path for v in model.trainable_variables if v.path not in paths]
    assert any("embedding" in p for p in others) and any("bias" in p for p in others)
    assert build_optimizer(model, learning_rate=1e-3, warmup_steps=1, train_steps=10).muon_variable_paths == ()
    with pytest.raises(ValueError, match="algorithm must be one of"):
        build_optimizer(model, learning_rate=1e-3, warmup_steps=1, train_steps=10, algorithm="sgd")
    plain = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="Sequential has none"):
        build_optimizer(plain, learning_rate=1e-3, warmup_steps=1, train_steps=10, algorithm="muon")


def test_config_names_a_wrong_algorithm():
    validate_optimizer(OptimizerSection(algorithm="muon"))
    with pytest.raises(ConfigError, match="optimizer.algorithm must be one of"):
        validate_optimizer(OptimizerSection(algorithm="Muon"))


def _muon_pretrainer():
    keras.utils.set_random_seed(0)
    return compiled_for_batches_of_two(XLNetPretrainer(XLNetBackbone(tiny_config())), algorithm="muon")


@pytest.mark.large
def test_a_run_resumed_from_its_backup_ends_with_the_uninterrupted_weights(tmp_path):
    batches = synthetic_batches(6, 2, seed=5)
    reference = _muon_pretrainer()
    reference.fit(as_dataset(batches).batch(2), epochs=1, verbose=0, shuffle=False)

    first = _muon_pretrainer()
    first.fit(as_dataset(batches[:3]).batch(2), epochs=1, verbose=0, shuffle=False)
    path = str(tmp_path / "backup.weights.h5")
    first.save_weights(path)
    resumed = _muon_pretrainer()
    resumed.load_weights(path)
    resumed.fit(as_dataset(batches[3:]).batch(2), epochs=1, verbose=0, shuffle=False)
    for a, b in zip(reference.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # The optimizer state (Muon momentum, step) was restored: a run restarted without it ends elsewhere.
    restarted = _muon_pretrainer()
    restarted.set_weights(first.get_weights())
    restarted.fit(as_dataset(batches[3:]).batch(2), epochs=1, verbose=0, shuffle=False)
    assert max(np.abs(a - b).max() for a, b in zip(reference.get_weights(), restarted.get_weights())) > 1e-4
