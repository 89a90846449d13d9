"""Without Apache Beam, the Beam commands print one line naming the extra and exit non-zero."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Run in a fresh interpreter: a meta-path blocker makes `import apache_beam` fail as if it
# were not installed, before anything could have imported it.
_SCRIPT = r"""
import sys

class BlockBeam:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "apache_beam":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, BlockBeam())
from xlnet_tf.cli.main import main

command = sys.argv[1]
args = {"quickstart": ["--minutes", "0.1"],
        "prepare-pretraining": ["--input", "x.txt", "--vocab", "v.model", "--output-dir", "o"],
        "prepare-finetuning": ["--tfds", "glue/mrpc", "--output-dir", "o"]}[command]
sys.exit(main([command, *args]))
"""


def _run(command, cwd):
    return subprocess.run([sys.executable, "-c", _SCRIPT, command], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": REPO})


@pytest.mark.subprocess
def test_beam_commands_name_the_extra_in_one_line(tmp_path):
    for command in ("prepare-pretraining", "prepare-finetuning", "quickstart"):
        result = _run(command, tmp_path)
        assert result.returncode == 1, result.stderr
        assert result.stdout == ""
        assert result.stderr.splitlines() == [
            f"xlnet-tf {command}: needs apache_beam (not installed); install the extra: "
            'pip install "xlnet_tf[beam]"']
    assert not list(tmp_path.iterdir())  # the quick start stopped before writing anything


def test_only_a_missing_beam_is_reported_for_beam_commands():
    from xlnet_tf.cli import main as cli

    assert cli._missing_extra("pretrain") is None
    error = ModuleNotFoundError("No module named 'apache_beam.io'", name="apache_beam.io")
    assert "xlnet_tf[beam]" in cli._missing_extra("quickstart", error)
    other = ModuleNotFoundError("No module named 'sentencepiece'", name="sentencepiece")
    assert cli._missing_extra("quickstart", other) is None
