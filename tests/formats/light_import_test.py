"""`xlnet_tf.formats` stays light: importing it in a fresh process loads no heavy module."""

import subprocess
import sys

HEAVY = ("tensorflow", "keras", "keras_hub", "apache_beam", "numpy", "sentencepiece")


def test_import_loads_no_heavy_module():
    code = (
        "import sys\n"
        "from xlnet_tf.formats import (finetuning_records, preset_files, pretraining_records,\n"
        "                              serving_metadata, special_tokens)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
