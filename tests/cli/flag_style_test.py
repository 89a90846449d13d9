"""One flag style: dashes everywhere, the old underscore spellings still parse (hidden), Beam's pass through."""

import argparse
import ast
import importlib
import os
import subprocess
import sys

import pytest

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.cli.main import COMMANDS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(REPO, "xlnet_tf", "cli")


def _command_parsers():
    """(command, parser) of every `xlnet-tf` subcommand."""
    for command, (target, _) in COMMANDS.items():
        module = importlib.import_module(target.split(":")[0])
        yield command, module._parser()


def _value(action):
    return str(action.choices[0]) if action.choices else "7"


def _argv(parser, spelling, tested):
    """An argv giving every required option a value, and `tested` under `spelling`."""
    argv = []
    for action in parser._actions:
        if action is tested or not action.option_strings:
            continue
        if action.required:
            argv += [action.option_strings[0], _value(action)]
    for group in parser._mutually_exclusive_groups:
        if group.required and not any(a.option_strings[0] in argv for a in group._group_actions):
            argv += [group._group_actions[0].option_strings[0], "x"]
    if tested.nargs == 0:
        return argv + [spelling]
    return argv + [spelling, _value(tested)]


def _old_spelling_cases():
    for command, parser in _command_parsers():
        for old, new in parser.old_spellings.items():
            yield pytest.param(command, old, new, id=f"{command} {old}")


def test_every_option_is_spelled_with_dashes():
    for command, parser in _command_parsers():
        assert isinstance(parser, CommandParser), command
        for action in parser._actions:
            for option in action.option_strings:
                assert "_" not in option, f"xlnet-tf {command}: {option}"


@pytest.mark.parametrize("command, old, new", list(_old_spelling_cases()))
def test_each_old_spelling_parses_to_the_same_value(command, old, new):
    parser = dict(_command_parsers())[command]
    tested = next(a for a in parser._actions if new in a.option_strings)
    with_new = parser.parse_known_args(_argv(parser, new, tested))
    with_old = parser.parse_known_args(_argv(parser, old, tested))
    assert with_old == with_new
    assert getattr(with_old[0], tested.dest) == getattr(with_new[0], tested.dest) != tested.default
    if tested.nargs != 0:  # --old_name=value as well
        argv = _argv(parser, old, tested)
        argv[-2:] = [f"{old}={argv[-1]}"]
        assert parser.parse_known_args(argv) == with_new


def test_the_renamed_flags_are_the_ones_that_had_underscores():
    parsers = dict(_command_parsers())
    assert set(parsers["prepare-pretraining"].old_spellings) == {
        "--output_dir", "--num_shards", "--chunk_length", "--keep_accents", "--max_sentence_chars",
        "--on_undecodable", "--tfds_text_feature", "--tfds_data_dir", "--tfds_download", "--tfds_read_shards"}
    assert {"--task_type", "--output_dir", "--sequence_length", "--tfds_splits", "--label_names",
            "--num_shards"} <= set(parsers["prepare-finetuning"].old_spellings)
    assert "--vocab_size" in parsers["vocab"].old_spellings


def test_help_and_errors_show_only_the_dash_spelling(capsys):
    from xlnet_tf.cli import prepare_pretraining

    with pytest.raises(SystemExit):
        prepare_pretraining._parser().parse_args(["--help"])
    out = capsys.readouterr().out
    assert "--output-dir" in out and "--num-shards" in out
    assert "--output_dir" not in out and "--num_shards" not in out
    with pytest.raises(SystemExit):
        prepare_pretraining._parser().parse_args(["--input", "a.txt", "--vocab", "v"])
    assert "required: --output-dir" in capsys.readouterr().err


def test_beam_options_and_values_pass_through_unchanged():
    from xlnet_tf.cli import prepare_pretraining

    args, rest = prepare_pretraining._parser().parse_known_args(
        ["--input", "a.txt", "--vocab", "v", "--output_dir", "o", "--temp_location", "gs://b/tmp",
         "--direct_num_workers=2", "--num_shards", "3"])
    assert args.output_dir == "o" and args.num_shards == 3
    assert rest == ["--temp_location", "gs://b/tmp", "--direct_num_workers=2"]
    # After `--` nothing is rewritten.
    parser = CommandParser()
    parser.add_renamed_argument("--output-dir")
    parser.add_argument("rest", nargs="*")
    assert parser.parse_args(["--", "--output_dir"]).rest == ["--output_dir"]


def test_renamed_flags_must_be_dashed_long_options():
    with pytest.raises(ValueError, match="dashed long flag"):
        CommandParser().add_renamed_argument("--seed")
    with pytest.raises(ValueError, match="dashed long flag"):
        CommandParser().add_renamed_argument("-o")


def test_argparse_only_in_cli():
    for root, _, files in os.walk(os.path.join(REPO, "xlnet_tf")):
        if os.path.commonpath([root, CLI]) == CLI:
            continue
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                assert "argparse" not in open(path, encoding="utf-8").read(), path


def test_commands_never_call_another_commands_main():
    for name in sorted(os.listdir(CLI)):
        if not name.endswith(".py") or name in ("__main__.py", "main.py"):
            continue
        tree = ast.parse(open(os.path.join(CLI, name), encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module != "xlnet_tf.cli.command_parser":
                imported = {alias.name for alias in node.names}
                assert not imported & {"main", "run", "_parser"}, f"{name} imports {imported} from {node.module}"


def test_quickstart_help_lists_its_options():
    from xlnet_tf.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["quickstart", "--help"])
    assert exit_info.value.code == 0


@pytest.mark.parametrize("script, prog", [("pretraining_data.py", "xlnet-tf prepare-pretraining"),
                                          ("finetuning_data.py", "xlnet-tf prepare-finetuning")])
def test_top_level_pipeline_scripts_run_from_a_checkout(tmp_path, script, prog):
    assert not os.path.exists(os.path.join(REPO, "pipelines", "__init__.py"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, os.path.join(REPO, "pipelines", script), "--help"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {prog}")
    assert "--output-dir" in result.stdout


def test_argument_default_suppress_keeps_the_job_defaults():
    # prepare-pretraining leaves out what was not given, so the job function's defaults apply.
    from xlnet_tf.cli import prepare_pretraining

    args, _ = prepare_pretraining._parser().parse_known_args(["--input", "a", "--vocab", "v", "--output-dir", "o"])
    assert vars(args) == {"input": ["a"], "vocab": "v", "output_dir": "o"}
    assert argparse.SUPPRESS == prepare_pretraining._parser().argument_default
