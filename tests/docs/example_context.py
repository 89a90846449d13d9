"""What the documented examples run against: named presets served on 127.0.0.1 and a working directory.

Examples name `xlnet_base_cased` (and `hf_xlnet_base_cased`) as a user would. Here those names resolve
through the real download path (`XLNET_TF_RELEASE_BASE_URL`, `XLNET_TF_HF_BASE_URL`, a private
`XLNET_TF_HOME`) to tiny models on a local server: the release archive is the two-layer, hidden-16 fixture
of tests/presets with its embedding and LM bias widened to the 200 pieces of the tiny SentencePiece model,
so any English text the examples use stays inside the vocabulary. Nothing reaches the internet.

Each example runs in a fresh working directory holding `spiece.model` (that vocabulary), `corpus/` (a few
text files), and `records/` (tiny pretraining records), the files the examples name. Examples that start
from an earlier step's output also find it there (`ARTIFACTS`): `runs/mrpc`, a fine-tuning work directory
(its `final/` task preset: a pair classifier on the named preset), and `exports/mrpc/1`, its SavedModel.
"""

import io
import os
import shutil
import zipfile

import numpy as np

from tests.harness import write_pretraining_records
from tests.presets.conftest import RELEASE_FOLDER, SPIECE, TF1_DIR

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "testdata")
VOCABULARY_SIZE = 200  # The pieces of tests/testdata/tiny_spiece.model.
RECORD_TOKENS = 2048  # per shard, two shards: `records/` holds 4,096 tokens.
WIDENED = ("model/transformer/word_embedding/lookup_table", "model/lm_loss/bias")


def tiny_release_zip(scratch_dir):
    """A release archive (original TF1 names) of a tiny model whose vocabulary is the tiny SentencePiece one."""
    import json

    import tensorflow as tf

    from xlnet_tf.convert.tf1_checkpoint import read_tf1_checkpoint

    arrays = read_tf1_checkpoint(os.path.join(TF1_DIR, "xlnet_model.ckpt"))
    arrays = {name: value for name, value in arrays.items() if not name.endswith(("/adam_m", "/adam_v"))}
    rng = np.random.default_rng(0)
    for name in WIDENED:
        value = arrays[name]
        extra = rng.normal(0.0, 0.02, (VOCABULARY_SIZE - value.shape[0],) + value.shape[1:])
        arrays[name] = np.concatenate([value, extra.astype(value.dtype)])
    folder = os.path.join(scratch_dir, RELEASE_FOLDER)
    os.makedirs(folder, exist_ok=True)
    names = sorted(arrays)
    tf.raw_ops.SaveV2(prefix=os.path.join(folder, "xlnet_model.ckpt"), tensor_names=names,
                      shape_and_slices=[""] * len(names), tensors=[tf.constant(arrays[n]) for n in names])
    with open(os.path.join(TF1_DIR, "xlnet_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["n_token"] = VOCABULARY_SIZE
    with open(os.path.join(folder, "xlnet_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    shutil.copy(SPIECE, os.path.join(folder, "spiece.model"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(RELEASE_FOLDER + "/", b"")
        for name in sorted(os.listdir(folder)):
            zf.write(os.path.join(folder, name), f"{RELEASE_FOLDER}/{name}")
    return buffer.getvalue()


def populate_workdir(directory):
    """The files the examples name, in `directory`: `spiece.model`, `corpus/*.txt`, `records/`."""
    shutil.copy(SPIECE, os.path.join(directory, "spiece.model"))
    corpus = os.path.join(directory, "corpus")
    os.makedirs(corpus, exist_ok=True)
    with open(os.path.join(TESTDATA, "tiny_corpus.txt"), encoding="utf-8") as f:
        text = f.read()
    documents = [d for d in text.split("\n\n") if d.strip()]
    half = len(documents) // 2
    for index, part in enumerate((documents[:half], documents[half:])):
        with open(os.path.join(corpus, f"part-{index}.txt"), "w", encoding="utf-8") as f:
            f.write("\n\n".join(part) + "\n")
    rng = np.random.default_rng(0)
    streams = [(rng.integers(9, VOCABULARY_SIZE, RECORD_TOKENS).tolist(),
                (np.arange(RECORD_TOKENS) // 16 % 2).tolist()) for _ in range(2)]
    write_pretraining_records(os.path.join(directory, "records"), streams, chunk_length=512,
                              vocabulary_size=VOCABULARY_SIZE, vocabulary=os.path.join(directory, "spiece.model"))


# The earlier steps' outputs an example starts from: public name or markdown file -> {path in the workdir: fixture}.
ARTIFACTS = {
    "docs/guide/serving.md": {"runs/mrpc": "finetuning_run"},
    "xlnet_tf.export_workdir": {"runs/mrpc": "finetuning_run"},
    "xlnet_tf.serving.export_task_workdir": {"runs/mrpc": "finetuning_run"},
    "xlnet_tf.serving.SavedModelPredictor": {"exports/mrpc/1": "task_export"},
    "xlnet_tf.serving.signature_custom_ops": {"exports/mrpc/1": "task_export"},
}


def link_artifacts(request, workdir, name):
    """Links the earlier steps' outputs that the examples of `name` (see `ARTIFACTS`) start from into `workdir`."""
    for relative, fixture in ARTIFACTS.get(name, {}).items():
        target = workdir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(request.getfixturevalue(fixture), target)
