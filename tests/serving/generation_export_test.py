"""The `generate` signature: equal to `XLNetCausalLM.generate`, in a fresh process too; bad requests; the CLI."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.serving.conftest import CONFIG, SPIECE
from xlnet_tf.cli import main as cli
from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM
from xlnet_tf.preprocessing.xlnet_causal_lm_preprocessor import (
    XLNetCausalLMPreprocessor,
)
from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
from xlnet_tf.serving.export_pretrained import export_preset

PROMPTS = ["the quick brown fox", "a fine", "the dog"]
PROMPT_LENGTH, LIMIT = 16, 6


@pytest.fixture(scope="module")
def generation_export(tmp_path_factory):
    """A generation preset (cached mode, window 16, at most 6 new tokens) exported with `export_preset`."""
    from tests.harness import tiny_config
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone

    keras.utils.set_random_seed(3)
    # Large weights: a random model far from uniform, whose continuations differ per prompt.
    backbone = XLNetBackbone(tiny_config(**CONFIG, initializer_range=0.5))
    model = XLNetCausalLM(backbone, XLNetCausalLMPreprocessor(XLNetTokenizer(SPIECE), sequence_length=PROMPT_LENGTH),
                          mode="cached")
    model.lm_bias.assign(np.random.default_rng(0).normal(0, 1, model.lm_bias.shape))
    root = tmp_path_factory.mktemp("generation")
    model.save_to_preset(str(root / "preset"))
    settings = json.loads((root / "preset" / "preprocessing.json").read_text())
    settings["max_new_tokens"] = LIMIT
    (root / "preset" / "preprocessing.json").write_text(json.dumps(settings))
    result = export_preset(str(root / "preset"), str(root / "export"))
    in_memory_model = XLNetCausalLM.from_preset(result["preset"])
    # Eager: each prompt's own max_length would otherwise trace the loop again (the tiny model runs faster so).
    in_memory_model.run_eagerly = True
    return in_memory_model, str(root / "export"), tf.saved_model.load(result["saved_model"])


def in_memory(model, prompts, new_tokens):
    tokenizer = model.preprocessor.tokenizer
    return [model.generate(p, max_length=len(tokenizer.tokenize(p)) + new_tokens, strip_prompt=True)
            for p in prompts]


def signature(loaded, prompts, new_tokens):
    out = loaded.signatures["generate"](prompt=tf.constant(prompts), max_new_tokens=tf.constant(new_tokens))
    return [t.decode() for t in out["continuation"].numpy()]


def test_signature_equals_generate_in_memory(generation_export):
    model, _, loaded = generation_export
    assert model.mode == "cached" and model.preprocessor.sequence_length == PROMPT_LENGTH
    served = signature(loaded, PROMPTS, LIMIT)
    assert served == in_memory(model, PROMPTS, LIMIT)
    assert served == model.generate(PROMPTS, max_new_tokens=LIMIT, strip_prompt=True)  # The same batch in memory.
    assert len(set(served)) > 1 and all(served)
    assert signature(loaded, PROMPTS[:1], 1) == in_memory(model, PROMPTS[:1], 1)


@pytest.mark.parametrize("prompts,new_tokens,message", [
    (["a fine", ""], 3, "prompt must not be empty"),
    (["a fine"], 0, rf"max_new_tokens must be in \[1, {LIMIT}\]"),
    (["a fine"], LIMIT + 1, rf"max_new_tokens must be in \[1, {LIMIT}\]"),
    (["the quick brown fox jumps over the lazy dog " * 3], 2,
     f"prompt is longer than the window of {PROMPT_LENGTH} tokens"),
])
def test_bad_requests_are_refused_naming_the_input(generation_export, prompts, new_tokens, message):
    _, _, loaded = generation_export
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        signature(loaded, prompts, new_tokens)


def test_generate_in_memory_refuses_an_empty_or_too_long_prompt(generation_export):
    model, _, _ = generation_export
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        model.generate(["a fine", ""], max_length=8)
    with pytest.raises(ValueError, match="prompt 0 has 9 tokens, which leaves no room"):
        model.generate({"token_ids": np.ones((1, 9), "int32") * 20, "padding_mask": np.ones((1, 9), "int32")})


def test_cli_prints_the_continuations(generation_export, capsys):
    _, path, loaded = generation_export
    assert cli.main(["generate", "--model", path, "--max-new-tokens", "4", *PROMPTS[:2]]) == 0
    assert capsys.readouterr().out.splitlines() == signature(loaded, PROMPTS[:2], 4)
    assert cli.main(["generate", "--model", path, "--max-new-tokens", "0", "a fine"]) == 2
    assert "max_new_tokens must be in [1, 6]" in capsys.readouterr().err


def test_cli_replaces_invalid_utf8_in_a_prompt_and_warns(generation_export, capsys):
    _, path, loaded = generation_export
    prompt = "the dog \udcff"  # The byte 0xFF of a command line, as Python hands it over (surrogateescape).
    assert cli.main(["generate", "--model", path, "--max-new-tokens", "3", "--jsonl", prompt]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"prompt": "the dog \ufffd",
                               "continuation": signature(loaded, ["the dog \ufffd"], 3)[0]}
    assert err == ("xlnet-tf generate: warning: PROMPT argument 1 is not valid UTF-8; each undecodable byte "
                   "sequence was replaced with U+FFFD before the model.\n")


LONG_PROMPT = "the quick brown fox jumps over the lazy dog " * 3


@pytest.mark.parametrize("argv,message", [
    (["--max-new-tokens", "-3", "a fine"], f"max_new_tokens must be in [1, {LIMIT}] (the exported limit), got -3"),
    (["--max-new-tokens", "0", "a fine"], f"max_new_tokens must be in [1, {LIMIT}] (the exported limit), got 0"),
    (["--max-new-tokens", str(10 ** 12), "a fine"],
     "--max-new-tokens 1000000000000 is not an int32; pass at most the export's max_new_tokens."),
    (["a fine", ""], "prompt must not be empty: prompt 1 has no tokens"),
    (["a fine", "the dog", " \t "], "prompt must not be empty: prompt 2 has no tokens"),
    (["a fine", LONG_PROMPT], f"prompt is longer than the window of {PROMPT_LENGTH} tokens: prompt 1 has {{}} tokens"),
])
def test_cli_refuses_a_bad_request_in_one_line_naming_the_prompt(generation_export, capsys, argv, message):
    model, path, _ = generation_export
    message = message.format(len(model.preprocessor.tokenizer.tokenize(LONG_PROMPT)))
    assert cli.main(["generate", "--model", path, "--max-new-tokens", "2", *argv]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"xlnet-tf generate: {message}\n")


@pytest.mark.subprocess
def test_fresh_process_without_xlnet_tf_equals_memory(generation_export, tmp_path):
    model, path, _ = generation_export
    script = textwrap.dedent(f"""
        import json, sys
        import tensorflow as tf
        import tensorflow_text  # registers the SentencePiece ops of the strings-in signature
        loaded = tf.saved_model.load({os.path.join(path, "saved_model")!r})
        out = loaded.signatures["generate"](prompt=tf.constant({PROMPTS!r}), max_new_tokens=tf.constant(5))
        print(json.dumps({{"text": [t.decode() for t in out["continuation"].numpy()],
                          "xlnet_tf_imported": any(m.startswith("xlnet_tf") for m in sys.modules)}}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=""))
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["xlnet_tf_imported"] is False
    assert out["text"] == in_memory(model, PROMPTS, 5)
