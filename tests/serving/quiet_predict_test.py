"""`xlnet-tf predict` in a fresh process prints no TensorFlow start-up line, and the project's own warnings.

`--verbose` bringing the lines back is checked on `prepare-pretraining` (tests/cli/quiet_command_line_test.py),
which loads TensorFlow too, at a fraction of a SavedModel load's time.
"""

import json

import pytest

from tests.cli.quiet_command_line_test import run_cli, startup_lines


@pytest.mark.subprocess
def test_predict_prints_no_startup_line_but_its_own_warning(real_classifier_export, tmp_path):
    _, path, _ = real_classifier_export
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'{"text": "fine", "text_pair": "ok"}\n{"text": "caf\xe9 au lait", "text_pair": "ok"}\n')
    args = ["predict", "--model", path, "--jsonl", str(source)]
    result = run_cli(args, tmp_path)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["text"] for line in result.stdout.splitlines()] == ["fine", "caf\ufffd au lait"]
    # Only the warning about the user's data, nothing from TensorFlow.
    warning = (f"xlnet-tf predict: warning: {source}:2 is not valid UTF-8; each undecodable byte sequence "
               "was replaced with U+FFFD before the model.")
    assert result.stderr.splitlines() == [warning], result.stderr
    assert not startup_lines(result.stderr)
