"""The quick start's report: context-free entropy from records, loss line, masked-word guesses."""

import math
import os

import numpy as np
import pytest
import sentencepiece as spm

from tests.training.helpers import cyclic_tokens, write_records
from xlnet_tf.builtin_corpus import write_builtin_corpus
from xlnet_tf.pretraining.learning_report import (context_free_entropy, describe_loss, format_predictions,
                                      masked_word_predictions)

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata")


def test_context_free_entropy_is_the_unigram_entropy_without_sep_and_cls(tmp_path):
    # 13 ids in turn, plus <sep> (4) and <cls> (3) that are never predicted.
    tokens = cyclic_tokens(13 * 40) + [4, 3] * 50
    records = write_records(str(tmp_path / "r"), tokens, vocabulary_size=40)
    assert context_free_entropy(records) == pytest.approx(math.log(13), abs=1e-6)


def test_describe_loss_places_the_loss_between_the_references():
    line = describe_loss(4.0, 5.5, 4000)
    assert "1.500 nats below a model that ignores context (5.500" in line
    assert f"uniform guessing is {math.log(4000):.3f}" in line
    assert "0.500 nats above" in describe_loss(6.0, 5.5, 4000)


def test_masked_word_predictions_hide_the_word_and_rank_guesses():
    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    processor = spm.SentencePieceProcessor(model_file=os.path.join(TESTDATA, "tiny_spiece.model"))
    config = XLNetConfig(vocabulary_size=processor.get_piece_size(), num_layers=1, num_heads=2,
                         head_dim=4, hidden_dim=8, intermediate_dim=16)
    model = XLNetPretrainer(XLNetBackbone(config))
    sentences = ["one small cat sat on my mat today"]
    results = masked_word_predictions(model, processor, sentences, top_k=3)
    assert len(results) == 1
    text, truth, guesses = results[0]
    assert "____" in text and truth not in text.split()
    probabilities = [p for _, p in guesses]
    assert len(guesses) == 3 and probabilities == sorted(probabilities, reverse=True)
    assert all(0 <= p <= 1 for p in probabilities)
    assert format_predictions(results)[1].startswith(f"    true: {truth!r}; model: ")


def test_builtin_corpus_holds_out_whole_documents(tmp_path):
    corpus, heldout = tmp_path / "corpus.txt", tmp_path / "heldout.txt"
    documents, _, _ = write_builtin_corpus(str(corpus), max_bytes=200_000, heldout_path=str(heldout),
                                           heldout_every=5)
    train = set(corpus.read_text().splitlines()) - {""}
    held = set(heldout.read_text().splitlines()) - {""}
    assert held and documents > 0
    assert not train & held
    assert np.isclose(len(heldout.read_text().split("\n\n")) - 1, documents / 4, rtol=0.3)


def test_sentence_continuations_continue_each_beginning_as_alone():
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM
    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.preprocessing.xlnet_causal_lm_preprocessor import XLNetCausalLMPreprocessor
    from xlnet_tf.preprocessing.xlnet_tokenizer import XLNetTokenizer
    from xlnet_tf.pretraining.learning_report import format_continuations, sentence_continuations

    tokenizer = XLNetTokenizer(os.path.join(TESTDATA, "tiny_spiece.model"))
    config = XLNetConfig(vocabulary_size=tokenizer.vocabulary_size(), num_layers=1, num_heads=2, head_dim=4,
                         hidden_dim=8, intermediate_dim=16, initializer_range=0.5)
    causal_lm = XLNetCausalLM(XLNetBackbone(config), XLNetCausalLMPreprocessor(tokenizer))
    sentences = ["the quick brown fox jumps over the lazy dog", "a fine day for a walk by the river"]
    results = sentence_continuations(causal_lm, sentences, words=4, new_tokens=3)
    assert [r[0] for r in results] == ["the quick brown fox", "a fine day for"]
    assert [r[2] for r in results] == ["jumps over the lazy dog", "a walk by the river"]
    alone = sentence_continuations(causal_lm, sentences[1:], words=4, new_tokens=3)
    assert results[1][1] == alone[0][1]
    assert format_continuations(results)[0] == "  the quick brown fox ..."
