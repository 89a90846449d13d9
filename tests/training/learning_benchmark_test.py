"""A fast version of benchmarks/learning_benchmark.py: exact entropies, scoring, and learning."""

import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from benchmarks import learning_benchmark as lb  # noqa: E402

SPECIAL = {"sep": 4, "cls": 3, "mask": 6}


def test_exact_entropies_of_a_deterministic_chain():
    language = lb.MarkovLanguage(num_words=6, successors=1, seed=0)
    bounds = language.entropies()
    assert bounds["both_sides"] == pytest.approx(0.0, abs=1e-9)
    assert bounds["left"] == pytest.approx(0.0, abs=1e-9)
    # A one-successor chain cycles; its stationary distribution is uniform on its cycle.
    support = int((language.stationary > 1e-6).sum())
    assert bounds["unigram"] == pytest.approx(math.log(support), abs=1e-4)


def test_both_sides_entropy_matches_a_sampled_estimate():
    language = lb.MarkovLanguage(num_words=10, successors=3, seed=1)
    stream = language.sample(40_000, np.random.default_rng(0))
    nats = [-math.log(language.middle_posterior(a, c)[b])
            for a, b, c in zip(stream[:-2], stream[1:-1], stream[2:])]
    bounds = language.entropies()
    assert np.mean(nats) == pytest.approx(bounds["both_sides"], abs=0.03)
    assert bounds["both_sides"] < bounds["left"] < bounds["unigram"]


def test_scoring_masks_hide_the_word_and_order_its_pieces():
    windows = {"token_ids": np.arange(10, 20)[None], "target_positions": np.array([[3, 4, 5, -1]]),
               "target_ids": np.array([[13, 14, 15, 0]])}
    _, chain, mapping = lb.scoring_inputs(windows, chain_rule=True)
    _, independent, _ = lb.scoring_inputs(windows, chain_rule=False)
    assert mapping[0, :3].argmax(-1).tolist() == [3, 4, 5] and mapping[0, 3].sum() == 0
    # Context never sees the word; piece k sees pieces before it (chain) or none (independent).
    assert chain[0, 0, 3:6].tolist() == [1, 1, 1] and independent[0, 0, 3:6].tolist() == [1, 1, 1]
    assert chain[0, 5, 3:6].tolist() == [0, 0, 1] and chain[0, 3, 3:6].tolist() == [1, 1, 1]
    assert independent[0, 5, 3:6].tolist() == [1, 1, 1]
    masked, _, _ = lb.scoring_inputs(windows, chain_rule=True, mask_id=6)
    assert masked[0, 3:6].tolist() == [6, 6, 6] and masked[0, 2] == 12


def test_forward_only_scorer_keeps_the_weights_and_drops_bi_data():
    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    config = XLNetConfig(vocabulary_size=20, num_layers=1, num_heads=2, head_dim=4, hidden_dim=8,
                         intermediate_dim=16, bi_data=True)
    model = XLNetPretrainer(XLNetBackbone(config))
    scorer = lb.forward_only(model)
    assert not scorer.backbone.config.bi_data
    for a, b in zip(model.get_weights(), scorer.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_pretraining_learns_the_synthetic_language(tmp_path):
    """Tiny model, 300 steps: the loss leaves the context-free level and the chain rule pays."""
    language = lb.MarkovLanguage(num_words=12, successors=3, seed=0)
    records, vocabulary, spellings = lb.build_data(
        str(tmp_path / "data"), language, train_words=20_000, vocab_size=40, seed=0,
        fast_records=True)
    config = lb.run_config(records, vocabulary, 40, 300, [
        "model.num_layers=2", "model.num_heads=2", "model.head_dim=16", "model.hidden_dim=32",
        "model.intermediate_dim=64", "model.memory_length=0", "model.reuse_length=0",
        "model.bi_data=false", "data.sequence_length=32", "data.num_predict=6", "data.perm_size=32",
        "optimizer.learning_rate=0.003", "optimizer.warmup_steps=20",
        "training.steps_per_epoch=50", "training.steps_per_execution=10"])
    pretrainer, losses, _ = lb.train_ours(config, str(tmp_path / "run"))
    windows = lb.heldout_windows(language, spellings, sequence_length=32, count=64, seed=0,
                                 special_ids=SPECIAL)
    chain, independent = lb.score_ours(pretrainer, windows)
    stats = lb.piece_statistics(language, spellings)
    # A run of this size ends near 2.2 nats per token from 3.15 (context-free: 2.85), a masked
    # word near 4.5 nats by the chain rule and 5.2 with independent pieces (uniform: 6.8).
    assert losses[-1] < 0.85 * stats["token_unigram"] < 0.8 * losses[0], losses
    assert chain < 0.8 * stats["mean_pieces"] * math.log(40), (chain, stats)
    assert chain < independent, (chain, independent)
