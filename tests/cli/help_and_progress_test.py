"""What a user meets at the command line: defaults in `--help`, plain progress off a terminal, `--init NAME`,
and the class count read off integer labels.

- every command's `--help` ends each option that has a default with `(default: VALUE)`, once;
- off a terminal the Keras bar is turned off and `plain_progress` prints one plain line per log interval of a
  real `fit` (no carriage return, no colour code), the user's own `training.verbose` wins;
- `xlnet-tf finetune --init NAME` resolves a registered preset name to its directory, leaves a directory as it is;
- `with_inferred_num_classes` gives `task.num_classes` as the largest integer label plus one, and says so.
"""

import argparse
import importlib
import io
import json

import numpy as np
import pytest

from xlnet_tf.cli import finetune, plain_progress
from xlnet_tf.cli.main import COMMANDS


def _help(command):
    module = importlib.import_module(COMMANDS[command][0].split(":")[0])
    return module._parser().format_help()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_with_a_default_shows_it_once(command):
    parser = importlib.import_module(COMMANDS[command][0].split(":")[0])._parser()
    text = " ".join(_help(command).split())
    for action in parser._actions:
        default = action.default
        if not action.option_strings or default in (None, False, [], argparse.SUPPRESS) or action.dest == "help":
            continue
        assert f"(default: {default})" in text or "default" in (action.help or "").lower(), (
            f"{command} {action.option_strings[0]}: its default {default!r} is not shown")
    assert text.count("(default: (default") == 0


def test_quickstart_help_describes_every_option_with_its_default():
    text = " ".join(_help("quickstart").split())
    assert "--workdir WORKDIR where every stage writes" in text
    assert "(default: xlnet_quickstart)" in text
    assert "SentencePiece pieces to train" in text and "(default: 4000)" in text
    assert "(default: 4.0)" in text


def test_export_help_describes_the_two_kinds_of_export():
    text = " ".join(_help("export").split())
    assert "serving_default takes raw text" in text
    assert "OUTPUT/preset" in text and "OUTPUT/saved_model" in text
    assert "(default: float32)" in text


def test_finetune_init_help_matches_the_preset_layout():
    text = " ".join(_help("finetune").split())
    assert "a preset name" in text and "tokenizer.json" in text


def test_the_bar_goes_off_only_off_a_terminal_and_only_unless_the_user_set_it():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert plain_progress.progress_overrides([], stream=io.StringIO()) == ["training.verbose=0"]
    assert plain_progress.progress_overrides([], stream=Terminal()) == []
    assert plain_progress.progress_overrides(["training.verbose=2"], stream=io.StringIO()) == []


def test_plain_progress_prints_one_plain_line_per_log_interval_of_a_real_fit():
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((40, 3), "float32"), np.zeros((40, 1), "float32")
    out = io.StringIO()
    callback = plain_progress.plain_progress(steps_per_epoch=10, train_steps=20, every_steps=4, stream=out)
    model.fit(x, y, batch_size=4, epochs=2, steps_per_epoch=10, verbose=0, callbacks=[callback])
    lines = out.getvalue().splitlines()
    # Steps 4, 8, 12, 16, 20: every 4th optimizer step of the 20, the last one included.
    assert [line.split()[1] for line in lines] == ["4/20", "8/20", "12/20", "16/20", "20/20"]
    assert all(" loss " in line for line in lines)
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_init_takes_a_preset_name_or_a_directory(tmp_path, monkeypatch):
    import xlnet_tf.presets

    monkeypatch.setattr(xlnet_tf.presets, "resolve_preset", lambda name: f"/cache/presets/{name}")
    assert finetune._initial_preset("xlnet_base_cased") == "/cache/presets/xlnet_base_cased"
    assert finetune._initial_preset(str(tmp_path)) == str(tmp_path)
    assert finetune._initial_preset("runs/missing") == "runs/missing"  # the run names the missing directory


def test_num_classes_is_inferred_from_integer_labels_and_said(tmp_path):
    from xlnet_tf import finetune_config_from_dict

    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps({"text": "t", "label": label}) for label in (0, 3, 1)), encoding="utf-8")
    config = finetune_config_from_dict({"task": {"task_type": "classification", "train_file": str(path)},
                                        "training": {"global_batch_size": 8}})
    out = io.StringIO()
    assert finetune.with_inferred_num_classes(config, stream=out).task.num_classes == 4
    assert out.getvalue().startswith("task.num_classes: 4, inferred from the integer labels 0..3")
    given = finetune_config_from_dict({"task": {"task_type": "classification", "train_file": str(path),
                                                "num_classes": 5}, "training": {"global_batch_size": 8}})
    assert finetune.with_inferred_num_classes(given, stream=out).task.num_classes == 5
    path.write_text(json.dumps({"text": "t", "label": "good"}) + "\n" + json.dumps({"text": "u", "label": "bad"}),
                    encoding="utf-8")
    named = finetune_config_from_dict({"task": {"task_type": "classification", "train_file": str(path)},
                                       "training": {"global_batch_size": 8}})
    assert finetune.with_inferred_num_classes(named, stream=io.StringIO()).task.num_classes == 0
