"""`xlnet-tf --help` and each command's argument parsing load no TensorFlow (checked in a fresh process)."""

import subprocess
import sys

import pytest

from xlnet_tf.cli.main import COMMANDS

# Commands whose module builds on TensorFlow at import (converting is nothing but TensorFlow work).
HEAVY_COMMANDS = ("convert",)


@pytest.mark.subprocess
def test_help_and_command_modules_load_no_tensorflow():
    modules = [COMMANDS[name][0].split(":")[0] for name in COMMANDS if name not in HEAVY_COMMANDS]
    code = (
        "import contextlib, importlib, io, sys\n"
        "from xlnet_tf.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help'])\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in ('tensorflow', 'keras', 'apache_beam') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]", result.stdout
