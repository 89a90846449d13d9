"""`--backend` of the training commands: `xlnet-tf pretrain --backend jax` trains on JAX; errors are one line."""

import json
import os
import subprocess
import sys

import keras
import pytest

from tests.training.helpers import TINY_RUN, cyclic_tokens, write_records
from tests.training.subprocess_runs import REPO, environment
from xlnet_tf.cli import pretrain as pretrain_cli
from xlnet_tf.cli.main import main

# 16 steps logged every 4: the compile of the first step is most of the run's time.
STEPS = ["training.train_steps=16", "training.steps_per_epoch=8", "training.log_every_steps=4"]


def _other_backend():
    """A backend other than the one Keras runs in this test process."""
    return "jax" if keras.config.backend() != "jax" else "tensorflow"


@pytest.mark.large
@pytest.mark.subprocess
def test_pretrain_with_backend_jax_trains_on_jax_with_keras_backend_unset(tmp_path):
    records = write_records(str(tmp_path / "records"), cyclic_tokens(4000), vocabulary_size=40)
    workdir = str(tmp_path / "run")
    sets = sum([["--set", s] for s in list(TINY_RUN) + STEPS + [f"data.train_files={records}"]], [])
    env = environment()
    del env["KERAS_BACKEND"]
    result = subprocess.run([sys.executable, "-m", "xlnet_tf.cli", "pretrain", "--backend", "jax", "--workdir",
                             workdir, "--strategy", "one_device", "--no-export", *sets],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    devices = [line for line in result.stdout.splitlines() if line.startswith("Devices: ")]
    assert devices == ["Devices: jax, SingleDevice, 1 replica, CPU: this run trains on the CPU "
                       "(no TPU or GPU in use)."], result.stdout
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    assert [line["step"] for line in lines] == [4, 8, 12, 16]
    # The cyclic stream is learnable: the loss falls from its first logged value (about log(40) = 3.7).
    assert lines[-1]["loss"] < lines[0]["loss"] - 0.1, lines


def test_a_bad_backend_is_one_line_naming_the_value_and_the_choices(tmp_path, capsys):
    assert main(["pretrain", "--backend", "tf", "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("xlnet-tf pretrain: --backend must be one of ('tensorflow', 'jax', 'torch'), got 'tf'.")
    config = tmp_path / "run.yaml"
    config.write_text("backend: mxnet\n")
    assert main(["finetune", "--config", str(config), "--workdir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"xlnet-tf finetune: {config}: backend must be one of ('tensorflow', 'jax', 'torch'), got 'mxnet'."
    assert not os.path.exists(tmp_path / "w")


def test_another_backend_than_the_imported_keras_is_one_error(tmp_path, capsys):
    other = _other_backend()
    for command in ("pretrain", "finetune", "quickstart"):
        assert main([command, "--backend", other, "--workdir", str(tmp_path / command)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"xlnet-tf {command}: Backend {other!r} (from --backend)")
        assert "already imported" in err and f"KERAS_BACKEND={other}" in err
    # The command's own entry point (a notebook calling it) refuses it too, the config's key as well as the flag.
    config = tmp_path / "run.yaml"
    config.write_text(f"backend: {other}\n")
    assert pretrain_cli.main(["--config", str(config), "--workdir", str(tmp_path / "w")]) == 2
    assert f"from {config}" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "w")
    # The backend Keras already runs is fine: the command goes on.
    assert pretrain_cli.main(["--backend", keras.config.backend(), "--config", "tiny", "--print-config"]) == 0
    assert "# Resolved xlnet-tf pretrain config" in capsys.readouterr().out


def test_backend_option_in_help(capsys):
    with pytest.raises(SystemExit):
        pretrain_cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--backend {tensorflow,jax,torch}" in text
    assert "default: the run config's top-level `backend:`, else KERAS_BACKEND, else tensorflow" in text
