"""The backend choice of a run: `--backend`, else the config's `backend:`, else `KERAS_BACKEND`, else TensorFlow."""

import subprocess
import sys

import pytest

from xlnet_tf.backend_selection import BackendError, requested_backend, select_backend
from xlnet_tf.config_schema import ConfigError
from xlnet_tf.finetuning.finetuning_config import finetune_config_from_dict
from xlnet_tf.pretraining.pretraining_config import run_config_from_dict


def _config(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_the_flag_wins_over_the_config_and_the_environment(tmp_path):
    config = _config(tmp_path, "run.yaml", "backend: torch\ntraining: {global_batch_size: 8}\n")
    environ = {"KERAS_BACKEND": "tensorflow"}
    assert requested_backend(["--backend", "jax"], [config], environ) == ("jax", "--backend")
    assert requested_backend(["--backend=jax"], [config], environ) == ("jax", "--backend")
    assert requested_backend([], [config], environ) == ("torch", config)
    assert requested_backend([], [], environ) == ("tensorflow", "KERAS_BACKEND")
    assert requested_backend([], [], {}) == ("tensorflow", "default")


def test_later_config_files_override_earlier_ones(tmp_path):
    first = _config(tmp_path, "a.yaml", "backend: torch\n")
    second = _config(tmp_path, "b.yaml", "backend: jax\n")
    plain = _config(tmp_path, "c.yaml", "training: {seed: 1}\n")
    assert requested_backend([], [first, second, plain], {}) == ("jax", second)


def test_select_sets_keras_backend_and_reads_config_flags(tmp_path):
    config = _config(tmp_path, "run.yaml", "backend: jax\n")
    environ = {}
    assert select_backend(["--config", config, "--workdir", "w"], environ=environ,
                          keras_loaded=lambda: None) == "jax"
    assert environ == {"KERAS_BACKEND": "jax"}


def test_a_bad_backend_is_one_line_naming_the_source(tmp_path):
    with pytest.raises(ConfigError, match=r"^--backend must be one of .*got 'tf'\.$"):
        requested_backend(["--backend", "tf"], [], {})
    config = _config(tmp_path, "bad.yaml", "backend: mxnet\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: backend must be one of"):
        requested_backend([], [config], {})


def test_keras_already_imported_with_another_backend_is_an_error():
    with pytest.raises(BackendError) as error:
        select_backend(["--backend", "jax"], [], environ={}, keras_loaded=lambda: "tensorflow")
    assert "\n" not in str(error.value)
    assert "KERAS_BACKEND=jax" in str(error.value)
    # Nothing asked for: the process keeps the backend it already runs; the same one is fine.
    assert select_backend([], [], environ={}, keras_loaded=lambda: "jax") == "jax"
    assert select_backend(["--backend", "tensorflow"], [], environ={}, keras_loaded=lambda: "tensorflow") == (
        "tensorflow")


def test_run_configs_accept_and_check_the_backend_key():
    config = run_config_from_dict({"backend": "jax", "training": {"global_batch_size": 8}})
    assert config.training.global_batch_size == 8
    with pytest.raises(ConfigError, match="backend must be one of"):
        run_config_from_dict({"backend": "theano", "training": {"global_batch_size": 8}})
    with pytest.raises(ConfigError, match="backend must be one of"):
        finetune_config_from_dict({"backend": "theano"})


def test_selection_happens_before_keras_is_imported(tmp_path):
    """In a fresh process the chosen backend is the one Keras starts with, whatever `KERAS_BACKEND` says.

    The config asks for TensorFlow against `KERAS_BACKEND=jax`, so the test runs where JAX is not
    installed too (CI's Python 3.13 pass): had the choice come too late, Keras would start on JAX.
    """
    config = _config(tmp_path, "run.yaml", "backend: tensorflow\n")
    code = ("import sys\nfrom xlnet_tf.backend_selection import select_backend\n"
            f"select_backend(['--config', {config!r}])\n"
            "assert 'keras' not in sys.modules\nimport keras\nprint(keras.config.backend())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "jax"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "tensorflow"
