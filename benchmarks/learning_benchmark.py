"""How fast pretraining learns, measured against exact entropies and against Hugging Face's PLM.

A synthetic language with known answers: a sparse Markov chain over made-up words, each
spelled in several pieces of a small SentencePiece vocabulary. A masked word depends on
the rest of the text only through its Markov blanket (one neighbour each side for a
first-order chain, two for a second-order one). The scoring input also shows how many
pieces the masked word has (one target slot per piece; nothing else of it), so the best
possible score of a masked middle word is exactly
`H(W_t | W_{t-2}, W_{t-1}, W_{t+1}, W_{t+2}, pieces of W_t)` under the run's own spelling,
enumerated from the chain: "the bound" of every table. The both-sides entropy without the
piece count, `H(W_t | W_{t-2}, W_{t-1}, W_{t+1}, W_{t+2})`, is printed beside it; a score
may go below that one.

`--family` runs a family of such languages (`FAMILY`: about 1, 2, 4 and 6 pieces per word,
2 to 8 likely successors, sentences of 6 to 24 words, a second-order chain over 1,024 two-word
contexts and one whose word two back counts through 4 groups, 128 contexts), one table row
per language: nats per masked word by the chain rule, its exact bound, the ratio and the
independent-pieces score. `--from-json WORKDIR/family_rows.jsonl` re-prints a family run;
rows recorded before the bound given the piece count get it from the run's vocabulary in
WORKDIR. `--rescore WORKDIR` scores a family run's trained models again, from their last
checkpoints, on held-out words drawn by the current rule (`heldout_windows`).
`benchmarks/family_diagnosis.py --workdir WORKDIR` tells where a family run's scores stand: against
the masked word's entropy given only part of its blanket, and a count model of the run's corpus.

The run:
1. writes a training corpus and a held-out corpus from the chain;
2. trains the vocabulary with `xlnet_tf.tokenizer_training` (what `xlnet-tf vocab` runs) and
   prepares records with the Beam job `xlnet_tf/beam/pretraining_data.py` (`--fast-records`:
   the tests' `write_records`);
3. pretrains with `run_pretraining` and the tiny config (`--set` overrides it);
4. trains Hugging Face's `XLNetLMHeadModel` on the same examples (our reader's token ids and
   segment ids, each batch masked by `DataCollatorForPermutationLanguageModeling`), same
   sizes, steps, optimizer and schedule;
5. scores held-out text: one masked word per window, its Markov blanket within one segment
   (`heldout_windows`), nats per word by the chain rule over its pieces (left-to-right
   factorization order through perm_mask / target_mapping, every other token visible) and
   with its pieces predicted independently, next to the exact bound given the word's piece
   count.

    python benchmarks/learning_benchmark.py --output benchmarks/learning_benchmark_results.txt
    python benchmarks/learning_benchmark.py --steps 200 --no-hf --set optimizer.learning_rate=2e-3
    python benchmarks/learning_benchmark.py --family --fast-records --output benchmarks/learning_benchmark_results.txt

Prints a table; `--output FILE` also writes it, above the runs the file already holds.
"""

import argparse
import json
import math
import os
import re
import shlex
import sys
import tempfile
import time

import numpy as np

if __package__:  # imported as benchmarks.NAME, as the tests do
    from benchmarks import results_table
else:  # run as a script: its own folder is on sys.path
    import results_table

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

SYLLABLES = ("ka", "lo", "mi", "nu", "pe", "ri", "so", "tu", "ve", "za")


# ---------------------------------------------------------------- the language

def _stationary(step, start, iterations=2000):
    """The stationary distribution of a chain by power iteration of its lazy version.

    Half a step of staying put has the same stationary distribution and no period, so
    the iteration converges on chains whose plain powers would oscillate.
    """
    p = start
    for _ in range(iterations):
        p = 0.5 * (p + step(p))
    return p / p.sum()


def _entropy_of_first_given_rest(joint):
    """`-sum P log P(first | rest)` of a joint probability table, its first axis the predicted variable."""
    total = joint.sum(axis=0, keepdims=True)  # the rest's marginal
    mask = joint > 0
    return -(joint[mask] * np.log((joint / np.where(total > 0, total, 1.0))[mask])).sum()


class MarkovLanguage:
    """A sparse Markov chain of order 1 or 2 over made-up words, with its exact entropies.

    A word of an order-1 chain depends on the word before it; of an order-2 chain, on the
    two words before it, so the words after a masked word tell more about it (they depend
    on it and on its left neighbour). Either way a masked word depends on the rest of the
    text only through the `order` words on each side (its Markov blanket), so the best
    possible score of a masked middle word is exactly
    `H(W_t | W_{t-order..t-1}, W_{t+1..t+order})`, computed by enumeration. A scorer that
    is shown how many pieces the masked word has (one target slot per piece) knows more:
    its bound is `H(W_t | blanket, pieces of W_t)`, `entropies(piece_counts=...)`.

    Args:
        num_words: size of the word inventory.
        successors: words that may follow each word (order 1) or each pair of words
            (order 2), with Dirichlet(1) probabilities.
        seed: decides spellings, successor sets and probabilities.
        syllables: `(fewest, most)` syllables per word: with the vocabulary size, this
            decides how many pieces a word is spelled with.
        order: 1 or 2, how many words to its left a word depends on.
        tail: probability spread evenly over every word after any context, so that no
            context decides the next word (without it, few successors make the bound
            near 0 nats, a ratio no model reaches).
        groups: order 2 only: the word two back counts only through its group, the words
            dealt at random into `groups` groups, so the chain has `groups * num_words`
            two-word contexts instead of `num_words ** 2` (None: every pair its own context).
            Natural languages reach further back through classes (agreement, case) more than
            through single words; fewer contexts also mean a smaller table to learn.

    Example:
    >>> language = MarkovLanguage(num_words=12, successors=3, seed=0)
    >>> bounds = language.entropies()
    >>> bounds["both_sides"] < bounds["left"] < bounds["unigram"]
    True
    >>> pieces = [1 + len(w) // 4 for w in language.words]  # a spelling's pieces per word
    >>> language.entropies(piece_counts=pieces)["both_sides_given_pieces"] <= bounds["both_sides"]
    True
    """

    def __init__(self, num_words=32, successors=4, seed=0, syllables=(2, 3), order=1, tail=0.0, groups=None):
        if order not in (1, 2):
            raise ValueError(f"order must be 1 or 2 (words a word depends on), got {order}.")
        if groups is not None and (order != 2 or not 1 <= groups <= num_words):
            raise ValueError(f"groups needs order 2 and must be in 1..num_words={num_words}, got {groups} "
                             f"(order {order}).")
        if not 1 <= successors <= num_words:
            raise ValueError(f"successors must be in 1..num_words={num_words}, got {successors}.")
        fewest, most = syllables
        if not 1 <= fewest <= most:
            raise ValueError(f"syllables must be (fewest, most) with 1 <= fewest <= most, got {syllables}.")
        if not 0.0 <= tail < 1.0:
            raise ValueError(f"tail must be in [0, 1), got {tail}.")
        if len(SYLLABLES) ** most < num_words:
            raise ValueError(f"{num_words} words cannot be spelled with at most {most} syllables.")
        rng = np.random.default_rng(seed)
        words = set()
        while len(words) < num_words:
            size = rng.integers(fewest, most + 1)
            words.add("".join(rng.choice(SYLLABLES, size)))
        self.words = sorted(words)
        self.order = order
        shape = (num_words,) * (order + 1)
        if groups is not None:
            shape = (groups,) + shape[1:]  # [G, W, W]: the word two back by its group
        self.transition = np.zeros(shape)  # [W] * order + [W]: p(next | the `order` words before)
        for context in np.ndindex(shape[:-1]):
            nxt = rng.choice(num_words, successors, replace=False)
            self.transition[context + (nxt,)] = rng.dirichlet(np.full(successors, 1.0))
        if groups is not None:
            group_of = rng.permutation(num_words) % groups  # [W]
            self.transition = self.transition[group_of]  # [W, W, W]
        self.transition = (1.0 - tail) * self.transition + tail / num_words
        # Both orders as a chain on pairs: p(c | a, b) and the stationary p(a, b).
        if order == 1:
            self._next = np.broadcast_to(self.transition[None], (num_words,) * 3)  # [W, W, W]
            single = _stationary(lambda p: p @ self.transition, np.full(num_words, 1.0 / num_words))
            self.pair_stationary = single[:, None] * self.transition  # [W, W]
        else:
            self._next = self.transition
            self.pair_stationary = _stationary(
                lambda p: np.einsum("ab,abc->bc", p, self.transition),
                np.full((num_words, num_words), 1.0 / num_words ** 2))
        self.stationary = self.pair_stationary.sum(axis=0)

    def blanket_joint(self):
        """`P(W_{t-2}, W_{t-1}, W_t, W_{t+1}, W_{t+2})` of five consecutive words of the stationary chain.

        Computed once per language (32 words: 268 MB) and kept read-only: the diagnosis asks for it
        once per part of the blanket and once per count model.
        """
        if getattr(self, "_blanket", None) is None:
            p = self._next
            self._blanket = (self.pair_stationary[:, :, None, None, None] * p[:, :, :, None, None]  # [W, W, W, 1, 1]
                             * p[None, :, :, :, None] * p[None, None])  # [W, W, W, W, W]
            self._blanket.flags.writeable = False
        return self._blanket

    def entropy_given(self, neighbours, piece_counts=None):
        """Exact `H(W_t | W_{t+o} for o in neighbours)` in nats per word, by enumeration.

        Which part of the Markov blanket a score corresponds to: a model that has learned to
        read only the words next to a masked one scores about `entropy_given((-1, 1))`.

        Args:
            neighbours: offsets from the masked word, a subset of (-2, -1, 1, 2).
            piece_counts: the pieces each word is spelled with: then also given `W_t`'s piece
                count, as chain-rule scoring is (see `entropies`).

        Example:
        >>> language = MarkovLanguage(num_words=8, successors=2, seed=0, order=2)
        >>> bool(language.entropy_given((-1, 1)) > language.entropy_given((-2, -1, 1, 2)))
        True
        """
        axis_of = {-2: 0, -1: 1, 1: 3, 2: 4}
        unknown = [o for o in neighbours if o not in axis_of]
        if unknown:
            raise ValueError(f"neighbours must be offsets among (-2, -1, 1, 2), got {tuple(neighbours)}.")
        kept = sorted({axis_of[o] for o in neighbours} | {2})
        joint = self.blanket_joint().sum(axis=tuple(a for a in range(5) if a not in kept))
        joint = np.moveaxis(joint, kept.index(2), 0)  # [W, kept neighbours...]: the masked word first
        if piece_counts is None:
            return float(_entropy_of_first_given_rest(joint))
        counts = self._piece_counts(piece_counts)
        return float(sum(_entropy_of_first_given_rest(joint[counts == n]) for n in np.unique(counts)))

    def posterior_cross_entropy(self, table, piece_counts):
        """Nats per masked middle word of the posterior a chain `table` gives, under this chain's text.

        `E[-log q(W_t | the blanket, W_t's piece count)]`, where `q` is `middle_posterior`'s rule
        computed from `table` (`[W, W, W]`, p(next | two words before)) instead of the true chain:
        exact, enumerated over the stationary chain. With the chain's own table this is the bound
        `entropies(piece_counts)["both_sides_given_pieces"]`.

        Example:
        >>> language = MarkovLanguage(num_words=6, successors=2, seed=0, order=2, tail=0.1)
        >>> counts = [1, 2, 1, 2, 1, 2]
        >>> bound = language.entropies(piece_counts=counts)["both_sides_given_pieces"]
        >>> bool(abs(language.posterior_cross_entropy(language.transition, counts) - bound) < 1e-9)
        True
        """
        counts = self._piece_counts(piece_counts)
        # [W, W, W, W, W]: q's unnormalised weight of the middle word given its four neighbours.
        weight = table[:, :, :, None, None] * table[None, :, :, :, None] * table[None, None]
        same = counts[:, None] == counts[None, :]  # [W, W]: the true word's count against each candidate's
        total = np.einsum("abcde,cC->abCde", weight, same.astype(float))  # [W, W, W, W, W]
        joint = self.blanket_joint()
        mask = joint > 0
        return float(-(joint[mask] * np.log(weight[mask] / total[mask])).sum())

    def middle_posterior(self, left, right, piece_counts=None, pieces=None):
        """`p(W_t | two words left, two words right)` over the word inventory.

        Args:
            left: `(W_{t-2}, W_{t-1})`.
            right: `(W_{t+1}, W_{t+2})`.
            piece_counts: with `pieces`, the pieces each word is spelled with: the posterior is
                then also conditioned on `W_t` having `pieces` pieces (words of other counts get 0).
            pieces: the masked word's piece count, as its target slots show it.
        """
        (a, b), (d, e) = left, right
        p = self._next
        joint = p[a, b] * p[b, :, d] * p[:, d, e]  # [W]: over W_t
        if piece_counts is not None:
            joint = np.where(self._piece_counts(piece_counts) == pieces, joint, 0.0)
        return joint / joint.sum()

    def _piece_counts(self, piece_counts):
        """`piece_counts` as an int array of one positive count per word, or a clear error."""
        counts = np.asarray(piece_counts)
        if counts.shape != (len(self.words),) or not np.issubdtype(counts.dtype, np.integer) or (counts < 1).any():
            raise ValueError(f"piece_counts must hold one positive integer per word ({len(self.words)}), "
                             f"got {piece_counts!r}.")
        return counts

    def entropies(self, piece_counts=None):
        """Exact entropies in nats per word: Markov blanket (both sides), left only, none.

        `both_sides` enumerates `P(a, b, c, d, e) = p(a, b) p(c|a,b) p(d|b,c) p(e|c,d)` over
        the pairs `(a, b)` the chain visits and takes `H(c | a, b, d, e)`; for an order-1
        chain the outer words drop out of the posterior, which is then `p(c | b, d)`.

        With `piece_counts` (the pieces each word is spelled with) also
        `both_sides_given_pieces`, `H(c | a, b, d, e, L(c))`: the bound of a scorer whose
        input shows the masked word's piece count, as chain-rule scoring does (one target
        slot per piece). The same enumeration, with the posterior renormalised within the
        words of each piece count; never above `both_sides`, equal when all counts agree.
        """
        counts = None if piece_counts is None else self._piece_counts(piece_counts)
        p = self._next
        both = given = 0.0
        for a, b in zip(*np.nonzero(self.pair_stationary)):
            # [c, d, e]: the joint of the three words after the pair (a, b).
            joint = self.pair_stationary[a, b] * p[a, b][:, None, None] * p[b][:, :, None] * p
            both += _entropy_of_first_given_rest(joint)
            if counts is not None:
                given += sum(_entropy_of_first_given_rest(joint[counts == n]) for n in np.unique(counts))
        with np.errstate(divide="ignore", invalid="ignore"):
            rows = np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)  # [W, W]
        left = -(self.pair_stationary * rows).sum()
        pi = self.stationary
        unigram = -(pi[pi > 0] * np.log(pi[pi > 0])).sum()
        bounds = {"both_sides": float(both), "left": float(left), "unigram": float(unigram)}
        if counts is not None:
            bounds["both_sides_given_pieces"] = float(given)
        return bounds

    def sample(self, num_words, rng):
        """A stream of word indices of the chain, started from its stationary distribution."""
        size = len(self.words)
        out = np.empty(num_words, np.int64)
        if self.order == 1:
            out[0] = rng.choice(size, p=self.stationary)
        else:
            pair = rng.choice(size * size, p=self.pair_stationary.ravel())
            out[0], out[1] = divmod(int(pair), size)
        cumulative = np.cumsum(self._next, axis=-1)
        cumulative[..., -1] = 1.0
        draws = rng.random(num_words)
        for t in range(self.order, num_words):
            before = out[t - 2] if t >= 2 else 0  # an order-1 chain ignores it
            out[t] = np.searchsorted(cumulative[before, out[t - 1]], draws[t])
        return out

    def write_text(self, path, stream, words_per_line=12, lines_per_document=40):
        """One sentence per line, a blank line between documents (the corpus convention)."""
        with open(path, "w") as f:
            for i in range(0, len(stream), words_per_line):
                f.write(" ".join(self.words[w] for w in stream[i:i + words_per_line]) + "\n")
                if (i // words_per_line + 1) % lines_per_document == 0:
                    f.write("\n")


# What counting the corpus can know: the chain's table estimated from the training words, each order
# interpolated with the one below it by this many pseudo-counts; the count model's score is the best of them.
COUNT_MODEL_WEIGHTS = (1.0, 3.0, 10.0, 30.0, 100.0)


def count_table(stream, num_words, order, weight):
    """p(next | the two words before) estimated by counting a word stream: `[W, W, W]`.

    Each order's counts are interpolated with the next lower order's estimate, `weight`
    pseudo-counts of it, down to the unigram counts plus one half; an order-1 table ignores
    the word two back. No entry is 0, so the table's posterior scores every word.

    Example:
    >>> table = count_table(np.array([0, 1, 0, 1, 0, 1]), num_words=3, order=2, weight=1.0)
    >>> bool(table[0, 1, 0] > table[0, 1, 2]), np.allclose(table.sum(axis=-1), 1.0)
    (True, True)
    """
    stream = np.asarray(stream)
    unigram = (np.bincount(stream, minlength=num_words) + 0.5) / (len(stream) + 0.5 * num_words)  # [W]
    pairs = np.zeros((num_words, num_words))
    np.add.at(pairs, (stream[:-1], stream[1:]), 1.0)
    first = (pairs + weight * unigram) / (pairs.sum(axis=-1, keepdims=True) + weight)  # [W, W]
    if order == 1:
        return np.broadcast_to(first[None], (num_words,) * 3)  # [W, W, W]
    triples = np.zeros((num_words,) * 3)
    np.add.at(triples, (stream[:-2], stream[1:-1], stream[2:]), 1.0)
    return (triples + weight * first[None]) / (triples.sum(axis=-1, keepdims=True) + weight)  # [W, W, W]


def count_model_score(language, stream, piece_counts):
    """`(nats per masked word, weight)` of the best count model of `stream` (`COUNT_MODEL_WEIGHTS`).

    The masked word's posterior from the counted table, given its blanket and piece count, scored
    exactly under the chain (`MarkovLanguage.posterior_cross_entropy`). The weight is picked against
    the truth, so this is what counting the corpus could at best score: near the bound, the corpus
    holds enough text and a model's gap is learning; far from it, the text itself falls short.
    """
    scores = [(language.posterior_cross_entropy(count_table(stream, len(language.words), language.order, w),
                                                piece_counts), w) for w in COUNT_MODEL_WEIGHTS]
    return min(scores)


# ---------------------------------------------------------------- data

def spell_words(vocabulary, words):
    """Each word's piece ids under a SentencePiece model: how the run's text spells it."""
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_file=vocabulary)
    return [processor.encode(w) for w in words]


def build_data(directory, language, *, train_words, vocab_size, seed, fast_records=False,
               sentence_words=12):
    """Corpus, vocabulary and records; returns (records_dir, spiece_path, piece ids per word).

    `sentence_words` words make a line of the corpus, a sentence of the records.
    """
    from xlnet_tf.tokenizer_training import train_vocabulary

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed + 1)
    stream = language.sample(train_words, rng)
    corpus = os.path.join(directory, "train.txt")
    language.write_text(corpus, stream, words_per_line=sentence_words)
    vocabulary = os.path.join(directory, "spiece.model")
    train_vocabulary(corpus, vocab_size, vocabulary, character_coverage=1.0, num_threads=1,
                     seed=seed)
    spellings = spell_words(vocabulary, language.words)
    records = os.path.join(directory, "records")
    if fast_records:
        from tests.training.helpers import write_records

        tokens = [t for w in stream for t in spellings[w]]
        pieces = np.mean([len(spellings[w]) for w in stream[:10_000]])
        write_records(records, tokens, vocabulary_size=vocab_size, chunk_length=512,
                      sentence_length=max(1, round(sentence_words * pieces)), vocabulary=vocabulary)
    else:
        from xlnet_tf.beam.pretraining_data import prepare_pretraining_data

        prepare_pretraining_data([corpus], records, vocabulary, num_shards=1, chunk_length=512, overwrite=True)
    return records, vocabulary, spellings


def piece_statistics(language, spellings):
    """Mean pieces per word and the token-level entropies of the stream (nats per token)."""
    pi = language.stationary
    mean_pieces = float(sum(pi[w] * len(s) for w, s in enumerate(spellings)))
    counts = {}
    for w, s in enumerate(spellings):
        for t in s:
            counts[t] = counts.get(t, 0.0) + pi[w]
    p = np.array(list(counts.values()))
    p = p[p > 0] / p.sum()  # words off the chain's recurrent class have probability 0
    bounds = language.entropies()
    return {"mean_pieces": mean_pieces,
            "token_unigram": float(-(p * np.log(p)).sum()),
            # Full left context: pieces are a function of the words, so the stream's
            # entropy rate per token is the word rate spread over the word's pieces.
            "token_rate_left": bounds["left"] / mean_pieces}


# ---------------------------------------------------------------- evaluation

def heldout_windows(language, spellings, *, sequence_length, count, seed, special_ids, blanket_in_one_segment=True):
    """Held-out examples `A <sep> B <sep> <cls>` with one masked word each.

    Returns a dict of numpy arrays: token_ids, segment_ids `[N, L]`, target_positions
    `[N, K]` (the masked word's pieces, -1 padded), target_ids `[N, K]`, the exact
    `-log p(word | neighbours)` of each masked word (`bound`) and
    `-log p(word | neighbours, its piece count)` (`bound_given_pieces`).

    The scorer sees every token but the masked word's and one target slot per piece of it,
    so its piece count and nothing else about it: the word's pieces are contiguous and the
    window's layout (separator, segments, the cut last word) follows from the visible tokens
    and that count. Which word is masked is drawn uniformly among the window's eligible
    words, whose number and places depend on the pieces only, so within a piece count the draw
    favours no word: `bound_given_pieces` is the exact posterior of what the scorer sees.

    Eligible are the whole words whose two neighbours on each side are whole words of the same
    segment (`blanket_in_one_segment`, the default). Pretraining examples follow A with a
    random B at least half the time (XLNet's A/B layout; always when no sentence ends where A
    could be cut), so what stands across the separator tells a trained model less than the
    chain's bound assumes it does. A masked word whose blanket crossed it would be scored
    against a bound no model trained on those examples can reach: on the 6-piece language,
    where 37% of all whole words have such a blanket, the tiny config at 1,800 steps scores
    them 7.9x their bound and the others 2.1x. `False` draws among all whole words, as rows
    recorded before this rule did.
    """
    rng = np.random.default_rng(seed + 7)
    body = sequence_length - 3
    half = body // 2
    counts = [len(s) for s in spellings]
    max_pieces = max(counts)
    out = {k: [] for k in ("token_ids", "segment_ids", "target_positions", "target_ids", "bound",
                           "bound_given_pieces")}
    while len(out["bound"]) < count:
        stream = language.sample(body, rng)  # enough words: every word has >= 1 piece
        tokens, word_of = [], []
        for i, w in enumerate(stream):
            tokens += spellings[w]
            word_of += [i] * len(spellings[w])
        tokens, word_of = tokens[:body], word_of[:body]
        last_full = word_of[-1] - 1  # the last word may be cut
        if last_full < 4:
            continue  # too few whole words in a short window: draw another
        if blanket_in_one_segment:
            in_b = {}  # word -> the set of segments its pieces sit in ({False}: A, {True}: B)
            for j, w in enumerate(word_of):
                in_b.setdefault(w, set()).add(j >= half)
            eligible = [t for t in range(2, last_full - 1)
                        if all(in_b[u] == in_b[t] and len(in_b[u]) == 1 for u in range(t - 2, t + 3))]
            if not eligible:
                continue
            t = eligible[int(rng.integers(len(eligible)))]
        else:
            t = int(rng.integers(2, last_full - 1))
        positions = [j for j, w in enumerate(word_of) if w == t]
        posterior = language.middle_posterior(stream[t - 2:t], stream[t + 1:t + 3])
        given_pieces = language.middle_posterior(stream[t - 2:t], stream[t + 1:t + 3], counts, counts[stream[t]])
        ids = tokens[:half] + [special_ids["sep"]] + tokens[half:] + [special_ids["sep"],
                                                                        special_ids["cls"]]
        segments = [0] * (half + 1) + [1] * (body - half + 1) + [2]
        shifted = [p if p < half else p + 1 for p in positions]
        out["token_ids"].append(ids)
        out["segment_ids"].append(segments)
        out["target_positions"].append(shifted + [-1] * (max_pieces - len(shifted)))
        out["target_ids"].append([ids[p] for p in shifted] + [0] * (max_pieces - len(shifted)))
        out["bound"].append(-math.log(posterior[stream[t]]))
        out["bound_given_pieces"].append(-math.log(given_pieces[stream[t]]))
    return {k: np.array(v) for k, v in out.items()}


def scoring_inputs(windows, chain_rule, mask_id=None):
    """perm_mask / target_mapping for scoring the masked word's pieces.

    chain_rule: piece k sees the context and pieces 0..k-1 (left-to-right factorization
    order); otherwise every piece sees only the context (independent pieces). Context
    never sees a piece of the masked word. `mask_id` replaces the masked pieces' input ids
    (Hugging Face's collator trains its model with `<mask>` there).
    """
    token_ids = windows["token_ids"].copy()
    positions = windows["target_positions"]
    n, length = token_ids.shape
    k = positions.shape[1]
    valid = positions >= 0
    target_mapping = np.zeros((n, k, length), np.float32)
    perm_mask = np.zeros((n, length, length), np.float32)
    for i in range(n):
        pos = positions[i][valid[i]]
        target_mapping[i, np.arange(len(pos)), pos] = 1.0
        perm_mask[i][:, pos] = 1.0  # nobody sees the masked word ...
        if chain_rule:
            for a, p in enumerate(pos):
                perm_mask[i, p, pos[:a]] = 0.0  # ... except its later pieces, the earlier ones
        if mask_id is not None:
            token_ids[i, pos] = mask_id
    return token_ids, perm_mask, target_mapping


def _score(logits, windows):
    """Nats per masked word from `[N, K, V]` logits."""
    logits = logits - logits.max(axis=-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, windows["target_ids"][..., None], axis=-1)[..., 0]
    valid = windows["target_positions"] >= 0
    return float(-(picked * valid).sum(axis=1).mean())


def forward_only(pretrainer):
    """The same weights in a model without `bi_data`, for scoring forward text.

    A `bi_data` model reads the second half of every batch as a backward stream
    (negated relative positions): scoring forward text with it scores half of the
    rows with the positions reversed.
    """
    import dataclasses

    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    config = dataclasses.replace(pretrainer.backbone.config, bi_data=False)
    scorer = XLNetPretrainer(XLNetBackbone(config))
    scorer.set_weights(pretrainer.get_weights())
    return scorer


def score_ours(pretrainer, windows, batch=64):
    """(chain-rule, independent) nats per masked word of our `XLNetPretrainer`."""
    pretrainer = forward_only(pretrainer)
    results = []
    for chain_rule in (True, False):
        token_ids, perm_mask, target_mapping = scoring_inputs(windows, chain_rule)
        logits = []
        for s in range(0, len(token_ids), batch):
            inputs = {"token_ids": token_ids[s:s + batch].astype("int32"),
                      "segment_ids": windows["segment_ids"][s:s + batch].astype("int32"),
                      "padding_mask": np.ones_like(token_ids[s:s + batch], "int32"),
                      "perm_mask": perm_mask[s:s + batch], "target_mapping": target_mapping[s:s + batch]}
            logits.append(np.asarray(pretrainer(inputs, training=False)["logits"]))
        results.append(_score(np.concatenate(logits), windows))
    return tuple(results)


def score_hf(model, windows, mask_id, batch=64):
    """(chain-rule, independent) nats per word of HF's model: the better of real and <mask> inputs."""
    import torch

    model.eval()
    results = []
    for chain_rule in (True, False):
        best = math.inf
        for masked_input in (None, mask_id):
            token_ids, perm_mask, target_mapping = scoring_inputs(windows, chain_rule, masked_input)
            logits = []
            with torch.no_grad():
                for s in range(0, len(token_ids), batch):
                    out = model(input_ids=torch.tensor(token_ids[s:s + batch]),
                                token_type_ids=torch.tensor(windows["segment_ids"][s:s + batch]),
                                perm_mask=torch.tensor(perm_mask[s:s + batch]),
                                target_mapping=torch.tensor(target_mapping[s:s + batch]))
                    logits.append(out.logits.numpy())
            best = min(best, _score(np.concatenate(logits), windows))
        results.append(best)
    model.train()
    return tuple(results)


# ---------------------------------------------------------------- training

def run_config(records, vocabulary, vocab_size, steps, overrides):
    from xlnet_tf.training.shipped_configs import resolve_config
    from xlnet_tf.pretraining.pretraining_config import load_run_config

    return load_run_config([resolve_config("tiny", "pretrain")], [
        f"data.train_files={records}", f"data.vocabulary={vocabulary}",
        f"model.vocabulary_size={vocab_size}", f"training.train_steps={steps}",
        "training.verbose=0", "distribution.strategy=one_device"] + list(overrides))


def matched_config(config):
    """`config` with what HF's PLM collator cannot do turned off: memory, bi_data, blocks."""
    from xlnet_tf.pretraining.pretraining_config import run_config_from_dict

    values = config.to_dict()
    values["model"].update(memory_length=0, reuse_length=0, bi_data=False)
    values["data"]["perm_size"] = config.data.sequence_length
    return run_config_from_dict(values)


def train_ours(config, workdir):
    """`run_pretraining`; returns (trained pretrainer, per-epoch mean losses, seconds)."""
    import keras

    from xlnet_tf.pretraining.pretraining_run import run_pretraining

    class Keep(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epoch_losses = []

        def on_epoch_end(self, epoch, logs=None):
            self.epoch_losses.append(float(logs["loss"]))

    keep = Keep()
    start = time.time()
    run_pretraining(config, workdir, extra_callbacks=[keep])
    return keep.model, keep.epoch_losses, time.time() - start


def matched_batches(config, steps):
    """Our reader's batches (the examples both sides train on), as numpy."""
    from xlnet_tf.data.pretraining import pretraining_dataset

    d, m = config.data, config.model
    dataset = pretraining_dataset(
        d.train_files, sequence_length=d.sequence_length, reuse_length=m.reuse_length,
        num_predict=d.num_predict, perm_size=d.perm_size,
        batch_size=config.training.global_batch_size, bi_data=m.bi_data, seed=d.seed,
        sentencepiece_model=d.vocabulary, mask_alpha=d.mask_alpha,
        max_span=d.max_span, whole_word_targets=d.whole_word_targets,
        spans_in_reading_order=d.spans_in_reading_order)
    yield from dataset.take(steps).as_numpy_iterator()


def _compact_targets(labels):
    """The collator's `[B, L, L]` identity target_mapping cut to the predicted rows.

    Same loss (rows with label -100 carry none), without running the query stream
    for every position: `[B, P, L]` one-hot rows of the targets and `[B, P]` labels.
    """
    import torch

    is_target = labels != -100  # [B, L]
    count = int(is_target.sum(1).max().clamp(min=1))
    batch, length = labels.shape
    mapping = torch.zeros(batch, count, length)
    compact = torch.full((batch, count), -100, dtype=labels.dtype)
    for b in range(batch):
        positions = torch.nonzero(is_target[b])[:, 0]
        mapping[b, torch.arange(len(positions)), positions] = 1.0
        compact[b, :len(positions)] = labels[b, positions]
    return mapping, compact


def train_hf(config, vocabulary, steps, schedule_steps=None):
    """HF's XLNetLMHeadModel + DataCollatorForPermutationLanguageModeling on our examples.

    `steps` may stop early on a schedule of `schedule_steps` (ours' train_steps), so
    losses stay comparable at equal steps.

    Returns (model, per-epoch mean losses, mean targets per sequence, seconds).
    """
    import torch
    from transformers import (DataCollatorForPermutationLanguageModeling, XLNetConfig,
                              XLNetLMHeadModel, XLNetTokenizer, get_linear_schedule_with_warmup)

    torch.manual_seed(config.training.seed)
    torch.set_num_threads(min(4, os.cpu_count() or 1))
    m, o, t = config.model, config.optimizer, config.training
    if m.num_heads * m.head_dim != m.hidden_dim:
        raise ValueError("HF XLNet needs num_heads * head_dim == hidden_dim.")
    hf_config = XLNetConfig(
        vocab_size=m.vocabulary_size, d_model=m.hidden_dim, n_layer=m.num_layers,
        n_head=m.num_heads, d_inner=m.intermediate_dim, ff_activation=m.activation,
        untie_r=m.untie_relative_bias, attn_type=m.attention_type, initializer_range=m.initializer_range,
        layer_norm_eps=m.layer_norm_epsilon, dropout=m.dropout, mem_len=None, reuse_len=None,
        bi_data=False, clamp_len=m.clamp_length, same_length=False)
    # Attention dropout: HF has a single `dropout`; ours is set equal in the matched runs.
    model = XLNetLMHeadModel(hf_config)
    tokenizer = XLNetTokenizer(vocab_file=vocabulary)
    collator = DataCollatorForPermutationLanguageModeling(
        # The same share of predicted tokens as ours (num_predict of sequence_length); the
        # collator's spans (up to 5 tokens, each in a context of span / plm_probability) play
        # the part of our reader's span masking.
        tokenizer=tokenizer, plm_probability=config.data.num_predict / config.data.sequence_length,
        max_span_length=5, return_tensors="pt")
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if ("bias" in name or "layer_norm" in name or name.endswith(("r_w_bias",
         "r_r_bias", "r_s_bias"))) else decay).append(parameter)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": o.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=o.learning_rate, betas=(o.beta_1, o.beta_2), eps=o.adam_epsilon)
    schedule = get_linear_schedule_with_warmup(optimizer, o.warmup_steps, schedule_steps or steps)
    epoch_losses, sums, targets = [], [0.0, 0.0], []
    start = time.time()
    model.train()
    batches = list(matched_batches(config, steps))  # tf.data is done before torch starts
    for step, batch in enumerate(batches, start=1):
        plm = collator([torch.tensor(row) for row in batch["token_ids"]])
        mapping, labels = _compact_targets(plm["labels"])
        out = model(input_ids=plm["input_ids"], token_type_ids=torch.tensor(batch["segment_ids"]),
                    perm_mask=plm["perm_mask"], target_mapping=mapping, labels=labels)
        optimizer.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), o.clip_norm)
        optimizer.step()
        schedule.step()
        count = float((labels != -100).sum())
        targets.append(count / len(batch["token_ids"]))
        sums[0] += float(out.loss.detach()) * count
        sums[1] += count
        if step % t.steps_per_epoch == 0:
            epoch_losses.append(sums[0] / sums[1])
            sums = [0.0, 0.0]
    return model, epoch_losses, float(np.mean(targets)), time.time() - start


# ---------------------------------------------------------------- the family

# Languages that vary what matters to the permutation objective: pieces per word (the word
# shapes and the vocabulary size), branching, sentence length and the chain's order. Pieces
# per word are what SentencePiece makes of each corpus (about 1, 2, 4 and 6).
FAMILY = (
    {"name": "1-piece", "num_words": 32, "successors": 4, "syllables": (2, 3), "vocab_size": 60,
     "sentence_words": 6, "order": 1},
    {"name": "2-pieces-branch-2", "num_words": 32, "successors": 2, "syllables": (2, 2),
     "vocab_size": 50, "sentence_words": 12, "order": 1, "tail": 0.1},
    {"name": "4-pieces-branch-8", "num_words": 32, "successors": 8, "syllables": (2, 3),
     "vocab_size": 40, "sentence_words": 12, "order": 1},  # the single-language default
    {"name": "6-pieces-long-sentences", "num_words": 32, "successors": 6, "syllables": (4, 5),
     "vocab_size": 40, "sentence_words": 24, "order": 1},
    {"name": "2nd-order", "num_words": 32, "successors": 4, "syllables": (2, 2), "vocab_size": 50,
     "sentence_words": 12, "order": 2, "tail": 0.1},
    # The same words and spellings, the word two back counting through its group of 8: 128 two-word
    # contexts instead of 1,024, which separates the order of the chain from the size of its table.
    {"name": "2nd-order-4-groups", "num_words": 32, "successors": 4, "syllables": (2, 2), "vocab_size": 50,
     "sentence_words": 12, "order": 2, "tail": 0.1, "groups": 4},
)


def family_language(spec, seed=0):
    """The `MarkovLanguage` of a `FAMILY` entry."""
    return MarkovLanguage(spec["num_words"], spec["successors"], seed=seed,
                          syllables=tuple(spec["syllables"]), order=spec["order"],
                          tail=spec.get("tail", 0.0), groups=spec.get("groups"))


def select_family(names):
    """`FAMILY` entries by name (all for None); an unknown name is an error naming the known ones."""
    if not names:
        return list(FAMILY)
    known = {spec["name"]: spec for spec in FAMILY}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown language(s) {', '.join(unknown)}; the family has {', '.join(known)}.")
    return [known[n] for n in names]


def run_family_language(spec, args, run_seed, workdir):
    """One row of the family table: trains the tiny config on one language and scores it."""
    language = family_language(spec)
    setup = prepare_run(language, os.path.join(workdir, "data"), vocab_size=spec["vocab_size"],
                        sentence_words=spec["sentence_words"], args=args,
                        overrides=[f"data.seed={run_seed}", f"training.seed={run_seed}"] + args.overrides)
    config, windows, figures = setup
    pretrainer, losses, seconds = train_ours(config, os.path.join(workdir, f"run_seed{run_seed}"))
    chain, independent = score_ours(pretrainer, windows)
    return {"language": dict(spec, syllables=list(spec["syllables"])), "seed": run_seed,
            "steps": args.steps, "bounds": figures["bounds"], "pieces": figures["pieces"]["mean_pieces"],
            "piece_counts": figures["piece_counts"], "heldout_bound": figures["heldout_bound"],
            "heldout_bound_given_pieces": figures["heldout_bound_given_pieces"], "chain": chain,
            "independent": independent,
            "last_loss": losses[-1], "seconds": seconds, "config": figures["config"]}


def run_family(args):
    """Runs the selected languages and seeds in turn; returns `{"family": rows}`.

    Each finished row is also appended to `<workdir>/family_rows.jsonl` and printed, so a long
    run shows (and keeps) its progress.
    """
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    workdir = args.workdir or tempfile.mkdtemp(prefix="learning_family_")
    rows = []
    for spec in select_family(args.languages):
        for run_seed in args.run_seeds:
            row = run_family_language(spec, args, run_seed, os.path.join(workdir, spec["name"]))
            rows.append(row)
            with open(os.path.join(workdir, "family_rows.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
            print(format_family_table(rows[-1:]), flush=True)
    return {"family": rows}


def rescore_family(workdir, args):
    """The rows of the family run in `workdir`, scored again on held-out windows drawn by the current rule.

    Each run's model is its checkpoint at the row's last step (`<language>/run_seed<S>/checkpoints`),
    or with `args.at_steps` its checkpoints at each of those steps (a learning curve: the run must have
    kept them, `--set training.keep_checkpoints=N`); its language's vocabulary is the run's own
    (`<language>/data/spiece.model`); nothing is trained. A missing file or a step past the run's end is
    an error naming it.

    Returns `{"family": rows}`, or with `args.at_steps` `{"curve": rows}`: one row per run and step,
    `steps` the checkpoint's step and `train_steps` the run's.
    """
    from xlnet_tf.pretraining.pretraining_config import load_run_config
    from xlnet_tf.serving.export_pretrained import pretrainer_from_checkpoint

    rows_file = os.path.join(workdir, "family_rows.jsonl")
    if not os.path.exists(rows_file):
        raise ValueError(f"{rows_file} does not exist: --rescore takes the --workdir of a --family run.")
    with open(rows_file) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    at_steps = args.at_steps
    rescored = []
    for row in rows:
        spec = row["language"]
        where = f"the {spec['name']} row (seed {row['seed']}) of {rows_file}"
        run = os.path.join(workdir, spec["name"], f"run_seed{row['seed']}")
        steps = at_steps or [row["steps"]]
        late = [s for s in steps if not 0 < s <= row["steps"]]
        if late:
            raise ValueError(f"--at-steps {' '.join(map(str, late))}: {where} trained {row['steps']} steps.")
        checkpoints = [os.path.join(run, "checkpoints", f"ckpt-{s:08d}.weights.h5") for s in steps]
        vocabulary = os.path.join(workdir, spec["name"], "data", "spiece.model")
        for path in checkpoints + [vocabulary, os.path.join(run, "config.yaml")]:
            if not os.path.exists(path):
                raise ValueError(f"{path} does not exist: {where} cannot be scored again without it.")
        config = load_run_config([os.path.join(run, "config.yaml")])
        language = family_language(spec)
        spellings = spell_words(vocabulary, language.words)
        windows, bounds = heldout_sample(language, spellings, config.data.sequence_length, args)
        for step, checkpoint in zip(steps, checkpoints):
            chain, independent = score_ours(pretrainer_from_checkpoint(checkpoint, config), windows)
            scored = dict(row, chain=chain, independent=independent, **bounds)
            if at_steps:
                scored.update(steps=step, train_steps=row["steps"])
            rescored.append(scored)
            print((format_curve_table if at_steps else format_family_table)(rescored[-1:]), flush=True)
    return {"curve": rescored} if at_steps else {"family": rescored}


def with_bound_given_pieces(row, rows_file, args):
    """A family row recorded with only the both-sides bound, completed by its bound given the piece count.

    The piece counts come from the run's own vocabulary, `<language>/data/spiece.model` in the
    run's workdir, the folder of its `family_rows.jsonl`; the held-out windows are drawn again with
    `args.eval_words` and `args.seed` and must reproduce the row's pieces per word and held-out
    both-sides bound, or the row is refused.
    """
    if "heldout_bound_given_pieces" in row:
        return row
    spec, where = row["language"], f"{rows_file}: the {row['language']['name']} row (seed {row['seed']})"
    vocabulary = os.path.join(os.path.dirname(os.path.abspath(rows_file)), spec["name"], "data", "spiece.model")
    if not os.path.exists(vocabulary):
        raise ValueError(f"{where} has no bound given the piece count, and its run's vocabulary {vocabulary}, "
                         "needed to derive it, is missing.")
    language = family_language(spec)
    spellings = spell_words(vocabulary, language.words)
    windows = heldout_windows(language, spellings, sequence_length=row["config"]["data"]["sequence_length"],
                              count=args.eval_words, seed=args.seed, special_ids=special_ids(),
                              blanket_in_one_segment=False)  # such rows drew among all whole words
    pieces = piece_statistics(language, spellings)["mean_pieces"]
    if not (math.isclose(pieces, row["pieces"], abs_tol=1e-9)
            and math.isclose(float(windows["bound"].mean()), row["heldout_bound"], abs_tol=1e-9)):
        raise ValueError(f"{where}: {vocabulary} and --eval-words {args.eval_words} --seed {args.seed} give "
                         f"{pieces:.4f} pieces per word and a held-out bound of {windows['bound'].mean():.4f}, "
                         f"not the recorded {row['pieces']:.4f} and {row['heldout_bound']:.4f}.")
    counts = [len(s) for s in spellings]
    given = language.entropies(piece_counts=counts)["both_sides_given_pieces"]
    return dict(row, bounds=dict(row["bounds"], both_sides_given_pieces=given), piece_counts=counts,
                heldout_bound_given_pieces=float(windows["bound_given_pieces"].mean()))


def family_run_line(steps, c):
    """The `run:` line above a family table: the steps and the settings of config dict `c` that the
    family's languages respond to."""
    return (
        f"run: {steps} steps, tiny config: seq {c['data']['sequence_length']}, batch "
        f"{c['training']['global_batch_size']}, layers {c['model']['num_layers']}, num_predict "
        f"{c['data']['num_predict']}, mask_alpha {c['data']['mask_alpha']}, max_span "
        f"{c['data']['max_span']}, whole-word targets {c['data'].get('whole_word_targets', False)}, spans in "
        f"reading order {c['data'].get('spans_in_reading_order', False)}, bi_data {c['model']['bi_data']}, "
        f"optimizer {c['optimizer'].get('algorithm', 'adamw')}, lr {c['optimizer']['learning_rate']:g}, warmup "
        f"{c['optimizer']['warmup_steps']}")


def format_family_table(rows):
    """The family's table: one row per language and seed.

    The bound is `H(W_t | blanket, piece count)`: chain-rule scoring shows the model one
    target slot per piece of the masked word, so a score may go below the both-sides entropy
    `H(W_t | blanket)`, printed beside it, but never below this one.
    """
    lines = [
        family_run_line(rows[0]["steps"], rows[0]["config"]),
        "",
        "| language | order | successors | words per sentence | pieces per word | exact bound: both sides "
        "and piece count (held-out sample) | both sides only (held-out sample) | left only | no context "
        "| masked word, chain rule | / bound | independent pieces | seed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        spec, b = r["language"], r["bounds"]
        lines.append(
            f"| {spec['name']} | {spec['order']}{f' ({g} groups)' if (g := spec.get('groups')) else ''} | "
            f"{spec['successors']} | {spec['sentence_words']} | "
            f"{r['pieces']:.2f} | {b['both_sides_given_pieces']:.3f} ({r['heldout_bound_given_pieces']:.3f}) | "
            f"{b['both_sides']:.3f} ({r['heldout_bound']:.3f}) | {b['left']:.3f} | {b['unigram']:.3f} | "
            f"{r['chain']:.3f} | {r['chain'] / r['heldout_bound_given_pieces']:.2f}x | "
            f"{r['independent']:.3f} | {r['seed']} |")
    return "\n".join(lines)


def format_curve_table(rows):
    """A learning curve: the checkpoints of family runs scored at several steps, one row per run and step.

    The `run:` line is the runs' own: a checkpoint before the run's last step was taken with the learning
    rate still decaying towards that end, so it scores no better than a run stopped there would.
    """
    lines = [
        family_run_line(rows[0]["train_steps"], rows[0]["config"]),
        "",
        "| language | seed | step | held-out bound given the piece count | masked word, chain rule | / bound "
        "| independent pieces |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['language']['name']} | {r['seed']} | {r['steps']} | {r['heldout_bound_given_pieces']:.3f} "
                     f"| {r['chain']:.3f} | {r['chain'] / r['heldout_bound_given_pieces']:.2f}x "
                     f"| {r['independent']:.3f} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- main

def _parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=None,
                        help="optimizer steps (default: the tiny config's train_steps, the quick start's budget)")
    parser.add_argument("--num-words", type=int, default=32)
    parser.add_argument("--successors", type=int, default=8)
    parser.add_argument("--vocab-size", type=int, default=40)
    parser.add_argument("--train-words", type=int, default=200_000)
    parser.add_argument("--eval-words", type=int, default=2000, help="held-out masked words")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-hf", action="store_true", help="skip Hugging Face's run")
    parser.add_argument("--only-hf", action="store_true", help="skip our run (HF experiments)")
    parser.add_argument("--hf-steps", type=int, default=None,
                        help="stop HF after this many steps of the same schedule (default: --steps)")
    parser.add_argument("--fast-records", action="store_true",
                        help="write records with the tests' helper instead of the Beam job")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--output", default=None, help="also write the table to this file")
    parser.add_argument("--from-json", nargs="+", default=None,
                        help="re-print the table of a run's .json (several family runs' .json or "
                             "family_rows.jsonl: one table)")
    parser.add_argument("--note", default="", help="with --output: said after the command in the title")
    results_table.add_arguments(parser)
    parser.add_argument("--family", action="store_true",
                        help="train and score each language of FAMILY in turn; one table row per language")
    parser.add_argument("--languages", nargs="+", default=None, metavar="NAME",
                        help="with --family: only these languages (default: all)")
    parser.add_argument("--run-seeds", nargs="+", type=int, default=[0], metavar="SEED",
                        help="with --family: one run per seed (data.seed and training.seed) and language")
    parser.add_argument("--rescore", default=None, metavar="WORKDIR",
                        help="score the trained models of the --family run in WORKDIR again (held-out "
                             "words drawn by the current rule); nothing is trained")
    parser.add_argument("--at-steps", nargs="+", type=int, default=None, metavar="STEP",
                        help="with --rescore: score each run's checkpoints at these steps, a learning curve (the "
                             "run keeps them with --set training.keep_checkpoints=N)")
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        metavar="SECTION.KEY=VALUE", help="override the tiny config")
    return parser


def special_ids():
    """The separator, class and mask ids the held-out windows are built with."""
    from xlnet_tf.formats import special_tokens

    return {"sep": special_tokens.SEP_TOKEN_ID, "cls": special_tokens.CLS_TOKEN_ID,
            "mask": special_tokens.MASK_TOKEN_ID}


def prepare_run(language, directory, *, vocab_size, sentence_words, args, overrides):
    """Data, run config and held-out windows of one language; returns (config, windows, figures)."""
    records, vocabulary, spellings = build_data(
        directory, language, train_words=args.train_words, vocab_size=vocab_size, seed=args.seed,
        fast_records=args.fast_records, sentence_words=sentence_words)
    config = run_config(records, vocabulary, vocab_size, args.steps, overrides)
    windows, bounds = heldout_sample(language, spellings, config.data.sequence_length, args)
    figures = dict(bounds, pieces=piece_statistics(language, spellings), steps=args.steps,
                   heldout_pieces=float((windows["target_positions"] >= 0).sum(1).mean()),
                   config=config.to_dict())
    return config, windows, figures


def heldout_sample(language, spellings, sequence_length, args):
    """The run's held-out windows and its bounds: exact (`bounds`, `piece_counts`) and on the sample."""
    windows = heldout_windows(language, spellings, sequence_length=sequence_length,
                              count=args.eval_words, seed=args.seed, special_ids=special_ids())
    counts = [len(s) for s in spellings]
    return windows, {"bounds": language.entropies(piece_counts=counts), "piece_counts": counts,
                     "heldout_bound": float(windows["bound"].mean()),
                     "heldout_bound_given_pieces": float(windows["bound_given_pieces"].mean())}


def run(args):
    """Runs the benchmark; returns a dict of every figure."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    workdir = args.workdir or tempfile.mkdtemp(prefix="learning_benchmark_")
    language = MarkovLanguage(args.num_words, args.successors, seed=args.seed)
    config, windows, figures = prepare_run(
        language, os.path.join(workdir, "data"), vocab_size=args.vocab_size, sentence_words=12,
        args=args, overrides=args.overrides)
    from xlnet_tf.formats import special_tokens

    if not args.only_hf:
        pretrainer, ours_losses, ours_seconds = train_ours(config, os.path.join(workdir, "ours"))
        figures["ours"] = {"epoch_losses": ours_losses, "seconds": ours_seconds,
                           "steps_per_minute": args.steps / ours_seconds * 60}
        figures["ours"]["chain"], figures["ours"]["independent"] = score_ours(pretrainer, windows)
    if not args.no_hf:
        # HF's collator has no memory, no bi_data and permutes the whole sequence: ours again
        # with the same (unless the config already is), so the pair differs only by framework
        # and the masking rule.
        config = matched_config(config)
        if not args.only_hf and config.to_dict() != figures["config"]:
            pretrainer, losses, seconds = train_ours(config, os.path.join(workdir, "ours_matched"))
            figures["ours_matched"] = {"epoch_losses": losses, "seconds": seconds,
                                       "steps_per_minute": args.steps / seconds * 60}
            figures["ours_matched"]["chain"], figures["ours_matched"]["independent"] = score_ours(
                pretrainer, windows)
        else:
            figures["ours_matched"] = figures.get("ours")
        if args.only_hf:
            hf_steps = args.hf_steps or args.steps
            model, hf_losses, hf_targets, hf_seconds = train_hf(config, config.data.vocabulary, hf_steps,
                                                                args.steps)
            figures["hf"] = {"epoch_losses": hf_losses, "seconds": hf_seconds, "steps": hf_steps,
                             "targets_per_sequence": hf_targets}
            figures["hf"]["chain"], figures["hf"]["independent"] = score_hf(
                model, windows, special_tokens.MASK_TOKEN_ID)
        else:
            figures["hf"] = hf_in_own_process(args, workdir)
    return figures


def hf_in_own_process(args, workdir):
    """HF's side of the run in a fresh process on the same data; returns its figures.

    PyTorch sharing a process with TensorFlow after our training ran many times slower
    (TensorFlow's thread pools stay up), so each framework gets a process of its own.
    """
    import subprocess

    output = os.path.join(workdir, "hf_side.txt")
    command = [sys.executable, os.path.abspath(__file__), "--only-hf", "--workdir", workdir,
               "--output", output, "--steps", str(args.steps), "--num-words", str(args.num_words),
               "--successors", str(args.successors), "--vocab-size", str(args.vocab_size),
               "--train-words", str(args.train_words), "--eval-words", str(args.eval_words),
               "--seed", str(args.seed)]
    command += (["--hf-steps", str(args.hf_steps)] if args.hf_steps else [])
    command += (["--fast-records"] if args.fast_records else [])
    for override in args.overrides:
        command += ["--set", override]
    subprocess.run(command, check=True)
    with open(os.path.splitext(output)[0] + ".json") as f:
        return json.load(f)["hf"]


def format_table(f):
    b, p = f["bounds"], f["pieces"]
    c = f["config"]
    lines = [
        f"language: {c['model']['vocabulary_size']} pieces, {p['mean_pieces']:.2f} pieces per word; "
        f"exact nats per word: both neighbours and the word's piece count (the bound) "
        f"{b['both_sides_given_pieces']:.3f} (held-out sample {f['heldout_bound_given_pieces']:.3f}), "
        f"both neighbours only {b['both_sides']:.3f} (held-out sample {f['heldout_bound']:.3f}), "
        f"left only {b['left']:.3f}, no context {b['unigram']:.3f}",
        f"tokens: unigram entropy {p['token_unigram']:.3f} nats, entropy rate with full left "
        f"context {p['token_rate_left']:.3f} nats (a floor for any predicted token)",
        f"run: {f['steps']} steps, seq {c['data']['sequence_length']}, batch "
        f"{c['training']['global_batch_size']}, num_predict {c['data']['num_predict']}, optimizer "
        f"{c['optimizer'].get('algorithm', 'adamw')}, lr {c['optimizer']['learning_rate']:g}, warmup "
        f"{c['optimizer']['warmup_steps']}, eps "
        f"{c['optimizer']['adam_epsilon']:g}, init {c['model']['initializer_range']:g}, dropout "
        f"{c['model']['dropout']:g}, memory {c['model']['memory_length']}, reuse "
        f"{c['model']['reuse_length']}, bi_data {c['model']['bi_data']}, perm_size "
        f"{c['data']['perm_size']}, mask_alpha {c['data'].get('mask_alpha', 6)}, max_span "
        f"{c['data'].get('max_span', 5)}, spans in reading order {c['data'].get('spans_in_reading_order', False)}, "
        f"jit {c['training'].get('jit_compile', False)}",
        "",
        "| model | masked word, chain rule (nats) | / bound given pieces | independent pieces (nats) | "
        "train loss, last epoch (nats/token) | steps/min |",
        "|---|---|---|---|---|---|",
    ]
    bound = f["heldout_bound_given_pieces"]
    pieces = f.get("heldout_pieces") or f["pieces"]["mean_pieces"]
    names = {"ours": "ours (config above)",
             "ours_matched": "ours, matched to HF (no memory, no bi_data, one permutation block)",
             "hf": "HF XLNetLMHeadModel, matched"}
    for key in ("ours", "ours_matched", "hf"):
        if not f.get(key) or (key == "ours_matched" and f[key] == f.get("ours")):
            continue
        r = f[key]
        name = names[key] + (f" ({r['steps']} steps)" if "steps" in r and r["steps"] != f["steps"] else "")
        rate = f"{r.get('steps', f['steps']) / r['seconds'] * 60:.0f}"
        lines.append(f"| {name} | {r['chain']:.3f} | {r['chain'] / bound:.2f}x | "
                     f"{r['independent']:.3f} | {r['epoch_losses'][-1]:.3f} | {rate} |")
    if pieces and f.get("ours"):
        lines += ["", f"per predicted token on the held-out masked words ({pieces:.2f} pieces each): "
                  f"ours {f['ours']['chain'] / pieces:.3f} nats, the bound {bound / pieces:.3f} nats"]
    if "hf" in f and f.get("ours_matched"):
        ours, hf = f["ours_matched"]["epoch_losses"], f["hf"]["epoch_losses"]
        per = f["config"]["training"]["steps_per_epoch"]
        lines += ["", f"train loss per epoch of {per} steps (ours matched / HF, each on its own objective; "
                  f"HF predicts {f['hf']['targets_per_sequence']:.1f} tokens per sequence, ours "
                  f"{f['config']['data']['num_predict']}):"]
        for i, (a, h) in enumerate(zip(ours, hf)):
            if (i + 1) % max(1, len(ours) // 8) == 0 or i == len(ours) - 1:
                lines.append(f"  step {(i + 1) * per:5d}: {a:.3f} / {h:.3f} = {a / h:.2f}")
        lines.append("held-out masked word ours matched / HF: chain rule "
                     f"{f['ours_matched']['chain'] / f['hf']['chain']:.2f}, independent pieces "
                     f"{f['ours_matched']['independent'] / f['hf']['independent']:.2f}")
    return "\n".join(lines)


def tiny_train_steps():
    """The tiny config's `training.train_steps`: the quick start's budget in steps."""
    import yaml

    from xlnet_tf.training.shipped_configs import resolve_config

    with open(resolve_config("tiny", "pretrain")) as f:
        return int(yaml.safe_load(f)["training"]["train_steps"])


def tiny_run_config(overrides=()):
    """The tiny config as the family runs it (no records: the paths are placeholders), with `overrides`."""
    return run_config("RECORDS", "VOCABULARY", 50, tiny_train_steps(), overrides)


def shipped_family_config():
    """The tiny config's dict as the family runs it, without overrides."""
    return tiny_run_config().to_dict()


def _set_overrides(command):
    """The `--set KEY=VALUE` overrides a recorded command line names, in order."""
    words = shlex.split(command)
    return [words[i + 1] for i, word in enumerate(words[:-1]) if word == "--set"] + [
        word.split("=", 1)[1] for word in words if word.startswith("--set=")]


def prepend_results(path, title, table):
    """Writes `# title` and `table` above what `path` already holds (atomically; history kept)."""
    from xlnet_tf.storage.atomic_files import write_text

    old = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    write_text(path, f"# {title}\n{table}\n" + ("\n" + old if old else ""))


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.steps is None:
        args.steps = tiny_train_steps()
    if args.at_steps and not args.rescore:
        sys.exit("--at-steps scores a run's checkpoints: it needs --rescore WORKDIR.")
    if args.from_json:
        figures = {}
        for path in args.from_json:
            with open(path) as f:
                if path.endswith(".jsonl"):  # a family run's rows, one per line, in its workdir
                    loaded = {"family": [json.loads(line) for line in f if line.strip()]}
                else:
                    loaded = json.load(f)
            if "family" in loaded:
                try:
                    rows = [with_bound_given_pieces(row, path, args) for row in loaded["family"]]
                except ValueError as error:
                    sys.exit(f"--from-json {error}")
                figures.setdefault("family", []).extend(rows)
            elif "curve" in loaded:  # a learning curve's .json
                figures.setdefault("curve", []).extend(loaded["curve"])
            elif "heldout_bound_given_pieces" not in loaded:
                sys.exit(f"--from-json {path}: a run recorded with only the both-sides bound; its bound given "
                         "the piece count cannot be derived from it.")
            else:
                figures = loaded
    elif args.rescore:
        try:
            figures = rescore_family(args.rescore, args)
        except ValueError as error:
            sys.exit(f"--rescore {error}")
    elif args.family:
        figures = run_family(args)
    else:
        figures = run(args)
    order = {spec["name"]: i for i, spec in enumerate(FAMILY)}

    def placed(r):  # rows of several runs: in FAMILY's order, then by seed
        return order.get(r["language"]["name"], len(order)), r["seed"]

    if "family" in figures:
        figures["family"].sort(key=placed)
    if "curve" in figures:  # then by step
        figures["curve"].sort(key=lambda r: (*placed(r), r["steps"]))
    table = (format_family_table(figures["family"]) if "family" in figures
             else format_curve_table(figures["curve"]) if "curve" in figures else format_table(figures))
    print(table)
    if args.output:
        from xlnet_tf.storage.atomic_files import write_text

        # Quoted, so a title's command (a --note with spaces) runs as written.
        command = shlex.join(["python", "benchmarks/learning_benchmark.py"] + list(argv or sys.argv[1:]))
        if args.from_json:
            # A re-print names the run it re-prints (the note), not the temporary files it read.
            command = args.note or "rows re-printed from earlier runs' .json"
        if args.only_hf:
            write_text(args.output, table + "\n")  # the HF side's hand-over file, read back at once
        else:
            note = f" ({args.note})" if args.note and not args.from_json else ""  # a re-print's note is its title
            prepend_results(args.output, f"{time.strftime('%Y-%m-%d')}: {command}{note}", table)
        write_text(os.path.splitext(args.output)[0] + ".json", json.dumps(figures, indent=1))
    return 0


def result_rows(section):
    """RESULTS.md rows: the tiny config's held-out nats per masked word over the exact bound, and ours / HF.

    The bound is the one given the masked word's piece count (column `/ bound given pieces`);
    a run recorded with only the both-sides entropy (column `/ bound`) gives no bound row, since
    that figure is not a bound for a scorer shown the piece count.
    """
    # A run with overrides is the config matched to HF's collator or a candidate; a re-scored run is
    # recorded beside the measured one it re-scores.
    if "language" in section.header:
        return _family_result_rows(section) if "--rescore" not in section.command else []
    shipped = "--set" not in section.command and "--rescore" not in section.command
    if "model" not in section.header:
        return []
    rows = []
    for cells in section.rows:
        if cells["model"].startswith("ours") and shipped and "/ bound given pieces" in cells:
            rows.append(results_table.Row(
                "learning, tiny config as shipped, synthetic Markov language: held-out nats per masked word",
                "exact entropy bound", results_table.number(cells["/ bound given pieces"]), "nats"))
    against_hf = re.search(r"held-out masked word ours matched / HF: chain rule ([\d.]+)", section.context)
    if against_hf:
        rows.append(results_table.Row(
            "learning, config matched to HF's collator, synthetic Markov language: held-out nats per masked word",
            "Hugging Face PyTorch PLM", float(against_hf.group(1)), "nats"))
    return rows


def _family_result_rows(section):
    """RESULTS.md rows of a family table: per language, seed 0's nats per masked word over its bound.

    Only tables of the tiny config as it ships now: the bound is the one given the piece count (the
    column header names it), the `run:` line is the shipped config's (its steps, the quick start's budget,
    and its settings: a run made before the config changed measures something else), and every `--set`
    of the command leaves the shipped config as it is (a candidate's run, made with `--set` before the
    config took it, counts once it ships). Other seeds of a language show the spread in the table, not
    in RESULTS.md.
    """
    if not any(cell.startswith("exact bound: both sides and piece count") for cell in section.header):
        return []
    run_line = re.search(r"^run: .*$", section.context, re.MULTILINE)
    shipped = shipped_family_config()
    if not run_line or run_line.group(0) != family_run_line(tiny_train_steps(), shipped):
        return []
    try:
        overridden = tiny_run_config(_set_overrides(section.command)).to_dict()
    except ValueError:  # a ConfigError: an override the config no longer takes is not the shipped config
        return []
    if overridden != shipped:
        return []
    return [results_table.Row(
        f"learning, tiny config as shipped, {cells['language']} language of the family: held-out nats per "
        "masked word", "exact entropy bound", results_table.number(cells["/ bound"]), "nats")
        for cells in section.rows if cells["seed"] == "0"]


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
