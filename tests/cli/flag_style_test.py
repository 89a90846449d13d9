"""One flag style: dashes everywhere, an underscore spelling refused naming the dash flag, Beam's pass through."""

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


def test_every_option_is_spelled_with_dashes():
    for command, parser in _command_parsers():
        assert isinstance(parser, CommandParser), command
        for action in parser._actions:
            for option in action.option_strings:
                assert "_" not in option, f"xlnet-tf {command}: {option}"


def _underscore_cases():
    for command, parser in _command_parsers():
        for action in parser._actions:
            for option in action.option_strings:
                if option.startswith("--") and "-" in option[2:]:
                    yield pytest.param(command, option, id=f"{command} {option}")


@pytest.mark.parametrize("command, flag", list(_underscore_cases()))
def test_an_underscore_spelling_is_refused_naming_the_dash_flag(command, flag, capsys):
    parser = dict(_command_parsers())[command]
    tested = next(a for a in parser._actions if flag in a.option_strings)
    old = "--" + flag[2:].replace("-", "_")
    argvs = [_argv(parser, old, tested)]
    if tested.nargs != 0:  # --old_name=value as well
        argvs.append(argvs[0][:-2] + [f"{old}={argvs[0][-1]}"])
    for argv in argvs:
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_known_args(argv)
        assert exit_info.value.code == 2
        assert f"unrecognized argument {old}: flags are spelled with dashes; use {flag}." in capsys.readouterr().err


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
        ["--input", "a.txt", "--vocab", "v", "--output-dir", "o", "--temp_location", "gs://b/tmp",
         "--direct_num_workers=2", "--num-shards", "3"])
    assert args.output_dir == "o" and args.num_shards == 3
    assert rest == ["--temp_location", "gs://b/tmp", "--direct_num_workers=2"]
    # After `--` nothing is checked.
    parser = CommandParser()
    parser.add_argument("--output-dir")
    parser.add_argument("rest", nargs="*")
    assert parser.parse_args(["--", "--output_dir"]).rest == ["--output_dir"]


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
