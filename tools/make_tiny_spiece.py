"""Regenerates tests/testdata/tiny_corpus.txt and tests/testdata/tiny_spiece.model.

The corpus is synthetic English written by this script (a small grammar over
word lists defined below), so no third-party text is committed. The model is a
unigram SentencePiece vocabulary of 200 pieces trained on it with
`xlnet_tf.tokenizer_training.train_vocabulary`, so ids 0..8 are XLNet's special
pieces. Run from the repository root:

    python tools/make_tiny_spiece.py
"""

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from xlnet_tf.tokenizer_training import train_vocabulary  # noqa: E402

SUBJECTS = (
    "the small robot", "a quiet river", "my neighbour", "the old teacher", "every student", "the red fox",
    "our team", "the tired engineer", "a bright lamp", "the northern village", "this model", "the garden",
    "a young painter", "the city council", "her brother", "the first train", "some farmers", "the museum",
)
VERBS = (
    "builds", "finds", "carries", "watches", "remembers", "paints", "explains", "follows", "repairs",
    "opens", "describes", "measures", "collects", "answers", "writes", "reads", "moves", "changes",
)
OBJECTS = (
    "a wooden table", "the long road", "three green apples", "the hidden door", "a simple question",
    "the evening light", "twelve letters", "the broken clock", "a blue notebook", "the winter market",
    "seven small boxes", "the mountain path", "an empty house", "the second chapter", "a warm coat",
)
ADVERBS = ("slowly", "carefully", "today", "again", "quickly", "at night", "every morning", "without a word")
CONNECTIVES = ("because", "while", "although", "after", "before", "when")


def sentence(rng):
    """One sentence: a clause, sometimes joined with a second one, with optional extras."""
    clause = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
    if rng.random() < 0.5:
        clause += f" {rng.choice(ADVERBS)}"
    if rng.random() < 0.3:
        clause += f" {rng.choice(CONNECTIVES)} {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
    if rng.random() < 0.2:
        clause += f" ({rng.randint(1, 2000)} times)"
    clause = clause[0].upper() + clause[1:]
    if rng.random() < 0.1:
        clause = f'"{clause}", she said'
    return clause + rng.choice((".", ".", ".", "!", "?"))


def corpus(num_documents, seed):
    """Documents of 2..8 sentences, one sentence per line, blank line between documents."""
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        documents.append("\n".join(sentence(rng) for _ in range(rng.randint(2, 8))))
    return "\n\n".join(documents) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", default="tests/testdata")
    parser.add_argument("--num_documents", type=int, default=120)
    parser.add_argument("--vocab_size", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    corpus_path = os.path.join(args.output_dir, "tiny_corpus.txt")
    with open(corpus_path, "w", encoding="utf-8") as f:
        f.write(corpus(args.num_documents, args.seed))
    result = train_vocabulary(
        corpus_path,
        args.vocab_size,
        os.path.join(args.output_dir, "tiny_spiece.model"),
        character_coverage=1.0,
        input_sentence_size=0,
        shuffle_input_sentence=False,
        num_threads=1,
        seed=args.seed,
    )
    print(f"{corpus_path}: {args.num_documents} documents; {result['path']}: {result['vocabulary_size']} pieces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
