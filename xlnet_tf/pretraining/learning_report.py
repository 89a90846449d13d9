"""What a pretraining run learned, in figures a user can read: the quick start's last stage.

`context_free_entropy` is the loss of the best model that ignores context (the unigram
entropy of the tokens it would predict), `masked_word_predictions` shows a trained
pretrainer's top guesses for one masked word of each held-out sentence, and
`sentence_continuations` how its `XLNetCausalLM` continues sentence beginnings;
`reference_losses` are the two figures a loss is read against (also the lines of
the run's `loss.png`, `xlnet_tf.pretraining.loss_curve`).
"""

import math

import numpy as np
import tensorflow as tf

from xlnet_tf.formats.special_tokens import CLS_TOKEN
from xlnet_tf.formats.special_tokens import SEP_TOKEN
from xlnet_tf.data.pretraining_records import PretrainingRecords


def context_free_entropy(records_pattern):
    """Unigram entropy (nats) of the predictable tokens in pretraining records.

    The PLM loss of a model that ignores its context cannot go below it: every
    token except `<sep>`/`<cls>` may be a target, so their unigram
    distribution is what such a model would predict.

    Args:
        records_pattern: the records directory or shard glob (`data.train_files`).

    Returns:
        float, nats per token.

    Example:
    >>> context_free_entropy("xlnet_quickstart/records")  # doctest: +SKIP
    5.7
    """
    records = PretrainingRecords(records_pattern)
    counts = np.zeros(0, np.int64)
    features = {"token_ids": tf.io.VarLenFeature(tf.int64)}
    dataset = tf.data.TFRecordDataset([s.path for s in records.shards]).batch(256).map(
        lambda serialized: tf.io.parse_example(serialized, features)["token_ids"].values)
    for tokens in dataset.as_numpy_iterator():
        found = np.bincount(tokens)
        if len(found) > len(counts):
            counts = np.pad(counts, (0, len(found) - len(counts)))
        counts[:len(found)] += found
    for name in ("sep", "cls"):
        special = records.special_ids.get(name)
        if special is not None and special < len(counts):
            counts[special] = 0
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def masked_word_predictions(pretrainer, processor, sentences, *, top_k=5, seed=0):
    """Masks one word of each sentence and returns the model's top guesses for its first piece.

    The word is hidden from every position (perm_mask) and predicted by the
    query stream (target_mapping), with the rest of the sentence as context:
    the question the pretraining objective asks.

    Args:
        pretrainer: a trained `XLNetPretrainer`.
        processor: the `sentencepiece.SentencePieceProcessor` of its vocabulary.
        sentences: list of str.
        top_k: guesses per sentence.
        seed: picks which word is masked.

    Returns:
        list of `(text with the word as "____", true piece, [(piece, probability), ...])`.
    """
    rng = np.random.default_rng(seed)
    sep, cls = processor.piece_to_id(SEP_TOKEN), processor.piece_to_id(CLS_TOKEN)
    results = []
    for sentence in sentences:
        ids = processor.encode(sentence)
        pieces = [processor.id_to_piece(i) for i in ids]
        # Whole words of one piece with some letters: their guesses are readable.
        choices = [i for i, p in enumerate(pieces) if p.startswith("\u2581") and len(p) > 3
                   and p[1:].isalpha() and (i + 1 == len(pieces) or pieces[i + 1].startswith("\u2581"))]
        if not choices or len(ids) < 4:
            continue
        position = int(rng.choice(choices))
        token_ids = np.array([ids + [sep, cls]], "int32")  # [1, L]
        length = token_ids.shape[1]
        perm_mask = np.zeros((1, length, length), "float32")  # [1, L, L]
        perm_mask[0, :, position] = 1.0
        target_mapping = np.zeros((1, 1, length), "float32")  # [1, 1, L]
        target_mapping[0, 0, position] = 1.0
        segment_ids = np.array([[0] * (length - 1) + [2]], "int32")
        logits = np.asarray(pretrainer({
            "token_ids": token_ids, "segment_ids": segment_ids,
            "padding_mask": np.ones_like(token_ids), "perm_mask": perm_mask,
            "target_mapping": target_mapping}, training=False)["logits"])[0, 0]
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        best = np.argsort(-probs)[:top_k]
        shown = processor.decode(ids[:position]) + " ____ " + processor.decode(ids[position + 1:])
        results.append((shown.strip(), pieces[position][1:],
                        [(processor.id_to_piece(int(i)).replace("\u2581", "") or "\u2581",
                          float(probs[i])) for i in best]))
    return results


def format_predictions(results):
    """Lines for `masked_word_predictions`' results."""
    lines = []
    for text, truth, guesses in results:
        lines.append(f"  {text}")
        lines.append(f"    true: {truth!r}; model: "
                     + ", ".join(f"{p!r} {q:.2f}" for p, q in guesses))
    return lines


def sentence_continuations(causal_lm, sentences, *, words=6, new_tokens=12):
    """How the model continues the first `words` words of each sentence (greedy, one batch).

    One `generate` call for all beginnings: a batch gives each the tokens it
    gets alone, and the loop is traced once.

    Args:
        causal_lm: an `XLNetCausalLM` with its preprocessor.
        sentences: held-out sentences.
        words: words of each sentence given as its beginning.
        new_tokens: the most tokens generated after each beginning.

    Returns:
        A list of `(beginning, continuation, the sentence's true rest)`.

    Example:
    >>> sentence_continuations(causal_lm, ["The file is opened for reading and closed."])  # doctest: +SKIP
    [('The file is opened for reading', ' and writing the file', 'and closed.')]
    """
    beginnings = [" ".join(s.split()[:words]) for s in sentences]
    rests = [" ".join(s.split()[words:]) for s in sentences]
    continuations = causal_lm.generate(beginnings, max_new_tokens=new_tokens, strip_prompt=True, sampler="greedy")
    return list(zip(beginnings, [str(c) for c in continuations], rests))


def format_continuations(results):
    """Lines for `sentence_continuations`' results."""
    lines = []
    for beginning, continuation, rest in results:
        lines.append(f"  {beginning} ...")
        lines.append(f"    true: {rest!r}; model: {continuation!r}")
    return lines


UNIFORM_LABEL = "uniform guessing"
CONTEXT_FREE_LABEL = "a model that ignores context"


def reference_losses(vocabulary_size, context_free=None):
    """The losses a trained model is read against: uniform guessing and, when known, the context-free model.

    Args:
        vocabulary_size: pieces in the vocabulary; uniform guessing loses `log(vocabulary_size)`.
        context_free: `context_free_entropy` of the records, or None when not computed
            (it takes a pass over every record).

    Returns:
        dict, label -> nats per predicted token, highest first.

    Example:
    >>> reference_losses(4000, context_free=5.7)
    {'uniform guessing': 8.294049640102028, 'a model that ignores context': 5.7}
    """
    references = {UNIFORM_LABEL: math.log(vocabulary_size)}
    if context_free is not None:
        references[CONTEXT_FREE_LABEL] = float(context_free)
    return references


def describe_loss(loss, context_free, vocabulary_size):
    """One line placing a loss between uniform guessing and the context-free model."""
    uniform = reference_losses(vocabulary_size)[UNIFORM_LABEL]
    gap = context_free - loss
    where = f"{gap:.3f} nats below" if gap >= 0 else f"{-gap:.3f} nats above"
    return (f"loss {loss:.3f} nats per predicted token, {where} a model that ignores context "
            f"({context_free:.3f}, the unigram entropy of the records' tokens); uniform guessing "
            f"is {uniform:.3f}.")
