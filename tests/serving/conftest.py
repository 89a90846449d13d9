"""Fixtures for the serving tests: a tiny vocabulary, an in-graph packer and task models.

The packer here is a small stand-in with the documented XLNet layout
(`A <sep> B <sep> <cls>`, left padding, `<cls>` last); the serving code only
relies on the preprocessor contract `(text[, text_pair]) -> {token_ids,
segment_ids, padding_mask}`.
"""

import io
import os

import keras
import pytest
import sentencepiece as spm
import tensorflow as tf

SEQUENCE_LENGTH = 32
HIDDEN = 16
CLS, SEP, PAD = 3, 4, 5
CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "hello world this is a small test of serving",
    "xlnet reads text in every order",
    "a fine film with a weak ending",
] * 10


@pytest.fixture(scope="session")
def spiece_proto():
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS),
        model_writer=buffer,
        vocab_size=64,
        model_type="unigram",
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        control_symbols=["<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"],
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return buffer.getvalue()


@pytest.fixture(scope="session")
def vocabulary(spiece_proto):
    processor = spm.SentencePieceProcessor(model_proto=spiece_proto)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def make_packer(spiece_proto, sequence_length=SEQUENCE_LENGTH):
    """Stand-in packer: tokenizes with tensorflow-text and packs left-padded rows."""
    import tensorflow_text as tf_text

    class Packer(tf.Module):
        # A tf.Module so that the SentencePiece resource is tracked by the SavedModel.
        def __init__(self):
            super().__init__()
            self.tokenizer = tf_text.SentencepieceTokenizer(model=spiece_proto, out_type=tf.int32)

        def __call__(self, text, text_pair=None):
            return pack(self.tokenizer, text, text_pair)

    return Packer()


def pack(tokenizer, text, text_pair=None, sequence_length=SEQUENCE_LENGTH):
        """Packs `A <sep> B <sep> <cls>`, left-padded, truncating A and B to fit."""
        a = tokenizer.tokenize(text)  # ragged [B, None]
        budget = sequence_length - (3 if text_pair is not None else 2)
        if text_pair is None:
            a = a[:, :budget]
            sep = tf.fill([a.nrows(), 1], SEP)
            cls = tf.fill([a.nrows(), 1], CLS)
            ids = tf.concat([a, sep, cls], axis=1)
            seg = tf.concat([tf.zeros_like(a), tf.zeros_like(sep), tf.fill([a.nrows(), 1], 2)], axis=1)
        else:
            b = tokenizer.tokenize(text_pair)
            # Longest first: trim the pair (B) to half the budget, A to the rest.
            b = b[:, : budget // 2]
            a = a[:, : budget - budget // 2]
            sep = tf.fill([a.nrows(), 1], SEP)
            cls = tf.fill([a.nrows(), 1], CLS)
            ids = tf.concat([a, sep, b, sep, cls], axis=1)
            seg = tf.concat(
                [tf.zeros_like(a), tf.zeros_like(sep), tf.ones_like(b), tf.ones_like(sep), tf.fill([a.nrows(), 1], 2)],
                axis=1,
            )
        # Left padding: reversing the flat values and the row lengths reverses both the
        # row order and each row; pad on the right, then reverse both axes back.
        def rev(r):
            return tf.RaggedTensor.from_row_lengths(tf.reverse(r.flat_values, [0]), tf.reverse(r.row_lengths(), [0]))

        ids_r = tf.reverse(rev(ids).to_tensor(default_value=PAD, shape=[None, sequence_length]), [0, 1])
        seg_r = tf.reverse(rev(seg).to_tensor(default_value=4, shape=[None, sequence_length]), [0, 1])
        mask = tf.reverse(
            rev(tf.ones_like(ids)).to_tensor(default_value=0, shape=[None, sequence_length]), [0, 1]
        )
        return {"token_ids": ids_r, "segment_ids": seg_r, "padding_mask": mask}


@pytest.fixture(scope="session")
def packer(spiece_proto):
    return make_packer(spiece_proto)


def make_task_model(num_outputs, per_token=False, vocabulary_size=64, seed=0):
    """A tiny attention model over the three XLNet inputs (stand-in for the task models)."""
    # No keras.utils.set_random_seed here: it clears TF kernel caches, which deletes the
    # kernel-owned SentencePiece resource of tokenizers built earlier (tensorflow-text).
    del seed
    inputs = {
        k: keras.Input((SEQUENCE_LENGTH,), dtype="int32", name=k)
        for k in ("token_ids", "segment_ids", "padding_mask")
    }
    x = keras.layers.Embedding(vocabulary_size, HIDDEN)(inputs["token_ids"])
    x = x + keras.layers.Embedding(5, HIDDEN)(inputs["segment_ids"])
    mask = keras.ops.cast(inputs["padding_mask"], "bool")
    attention_mask = keras.ops.logical_and(mask[:, :, None], mask[:, None, :])
    x = x + keras.layers.MultiHeadAttention(2, 8)(x, x, attention_mask=attention_mask)
    x = keras.layers.LayerNormalization()(x)
    if per_token:
        logits = keras.layers.Dense(num_outputs)(x)
    else:
        logits = keras.layers.Dense(num_outputs)(keras.activations.tanh(x[:, -1]))
    return keras.Model(inputs, logits)


# -- real (tiny) task models exported through export_task_workdir -------------------------

SPIECE = os.path.join(os.path.dirname(__file__), "..", "testdata", "tiny_spiece.model")
LENGTH = 32
LABELS = ["contradiction", "neutral", "entailment"]
CONFIG = dict(vocabulary_size=200, num_layers=2, num_heads=2, head_dim=8, hidden_dim=16,
              intermediate_dim=32, dropout=0.0, attention_dropout=0.0)
SQUAD = dict(max_query_length=8, doc_stride=8, max_answer_length=10)
PASSAGES = [
    "The quick brown fox jumps over the lazy dog near the river bank in the morning while birds sing.",
    "Short one.",
    "",
]
QUESTIONS = ["Who jumps?", "What?", "Nothing here?"]


@pytest.fixture(scope="session")
def tokenizer():
    from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer

    return XLNetTokenizer(SPIECE)


def tiny_backbone():
    """The serving tests' backbone: the harness's tiny config at `CONFIG`'s sizes."""
    from tests.harness import tiny_config
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone

    return XLNetBackbone(tiny_config(**CONFIG))


def export_task(root, model, preprocessing, through_workdir=True):
    """Builds `model`, saves it with the test vocabulary and `preprocessing` as the `final` preset
    of a fine-tuning work directory (or, with `through_workdir=False`, as a bare task preset),
    and exports that with `export_task_workdir`.

    Returns:
        `(model, export path, the loaded SavedModel)`.
    """
    from xlnet_tf.serving.export_task_workdir import export_task_workdir

    model.build_with_dummy_inputs()
    source = root / "workdir" if through_workdir else root / "preset"
    model.save_to_preset(str(source / "final" if through_workdir else source), vocabulary_file=SPIECE,
                         preprocessing=preprocessing)
    path = export_task_workdir(str(source), str(root / "export"))
    return model, path, tf.saved_model.load(path)


@pytest.fixture(scope="session")
def real_classifier_export(tmp_path_factory):
    from xlnet_tf.models.xlnet_classifier import XLNetClassifier

    return export_task(tmp_path_factory.mktemp("cls"), XLNetClassifier(tiny_backbone(), num_classes=3), {
        "task_type": "classification", "sequence_length": LENGTH, "text_fields": ["premise", "hypothesis"],
        "truncate": "longest_first", "label_names": LABELS})


@pytest.fixture(scope="session")
def real_span_export(tmp_path_factory):
    from xlnet_tf.models.xlnet_span_labeler import XLNetSpanLabeler

    # A task preset directly, no workdir.
    return export_task(tmp_path_factory.mktemp("span"), XLNetSpanLabeler(tiny_backbone(), start_n_top=3, end_n_top=3),
                       {"task_type": "span", "sequence_length": LENGTH, "text_fields": ["context", "question"],
                        **SQUAD}, through_workdir=False)


@pytest.fixture(scope="session")
def finetuned_workdir(tmp_path_factory):
    """`finetuned_workdir(task)`: the work directory of a one-step `xlnet-tf finetune` of `task`
    (a name of `tests.serving.tiny_finetuning_runs.TASKS`); all are run once per session, in a
    child process (see that module)."""
    from tests.serving.tiny_finetuning_runs import run_all_in_a_child_process

    runs = {}

    def workdir(task):
        if not runs:
            runs.update(run_all_in_a_child_process(tmp_path_factory.mktemp("finetuned")))
        return runs[task]

    return workdir


@pytest.fixture(scope="session")
def backbone_export(tmp_path_factory):
    """`(preset, export)`: a tiny backbone preset and its `xlnet-tf export --preset` (preset/ + saved_model/)."""
    from tests.serving.tiny_finetuning_runs import write_backbone_preset
    from xlnet_tf.cli.main import main

    root = tmp_path_factory.mktemp("backbone")
    preset = write_backbone_preset(root / "preset")
    assert main(["export", "--preset", preset, "--output", str(root / "export")]) == 0
    return preset, str(root / "export")


def no_question(context):
    """Empty multiple-choice questions, one per context: the choices carry the whole second segment."""
    return tf.fill(tf.shape(context), "")
