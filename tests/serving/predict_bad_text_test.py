"""`xlnet-tf predict` with invalid UTF-8 input and an atomic `--output`."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf.cli.predict import main
from xlnet_tf.serving import saved_model_predictor

BAD = "caf\udce9 au lait"  # how Python hands over the argv bytes b"caf\xe9 au lait" (PEP 383)
REPLACED = "caf\ufffd au lait"


def test_invalid_utf8_argument_is_replaced_and_reported(real_classifier_export, capsys):
    _, path, loaded = real_classifier_export
    assert main(["--model", path, BAD, "--pair", "a drink"]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out.encode("utf-8"))  # stdout is valid UTF-8 JSON
    assert record["text"] == REPLACED
    expected = loaded.signatures["serving_default"](text=tf.constant([REPLACED]), text_pair=tf.constant(["a drink"]))
    np.testing.assert_allclose(record["probabilities"], expected["probabilities"].numpy()[0], atol=1e-6)
    assert "TEXT argument 1 is not valid UTF-8" in captured.err and "U+FFFD" in captured.err


def test_invalid_utf8_jsonl_line_to_output_file(real_classifier_export, tmp_path, capsys):
    _, path, _ = real_classifier_export
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'{"text": "fine", "text_pair": "ok"}\n{"text": "caf\xe9 au lait", "text_pair": "\xff"}\n'
                       b'{"text": "lone \\udc80 escape", "text_pair": "ok"}\n')
    out = tmp_path / "out.jsonl"
    assert main(["--model", path, "--jsonl", str(source), "--output", str(out)]) == 0
    records = [json.loads(line) for line in out.read_bytes().decode("utf-8").splitlines()]
    assert [r["text"] for r in records] == ["fine", REPLACED, "lone \ufffd escape"]
    assert records[1]["text_pair"] == "\ufffd"
    err = capsys.readouterr().err
    assert f"{source}:2 is not valid UTF-8" in err and f"{source}:3 is not valid UTF-8" in err
    assert f"{source}:1 " not in err


def test_output_is_all_or_nothing(real_classifier_export, tmp_path, monkeypatch):
    _, path, _ = real_classifier_export
    out = tmp_path / "out.jsonl"
    out.write_text("previous results\n")
    calls = []

    def failing_format(*args):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("interrupted")
        return {"n": len(calls)}

    monkeypatch.setattr(saved_model_predictor, "prediction_record", failing_format)
    with pytest.raises(RuntimeError, match="interrupted"):
        main(["--model", path, "a", "b", "c", "--pair", "x", "--output", str(out), "--batch-size", "2"])
    assert out.read_text() == "previous results\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]  # no temporary file left behind
