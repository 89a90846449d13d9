"""Where a learning-benchmark family run stands: which neighbours its scores read, and what counting allows.

For each row of a `learning_benchmark.py --family` run it prints, next to the model's chain-rule score and
the exact bound (`H(W_t | blanket, piece count)`), the exact entropies of the masked word given only part
of its Markov blanket and the score of a count model of the run's own training corpus:

- *the two next to it*, `H(W_t | W_{t-1}, W_{t+1}, pieces)`, and *three*, the better of
  `H(W_t | W_{t-2}, W_{t-1}, W_{t+1}, pieces)` and `H(W_t | W_{t-1}, W_{t+1}, W_{t+2}, pieces)`: a score
  between two of these columns says how much of the blanket the model has learned to read (for a
  first-order chain all three equal the bound);
- *count model*: the chain's table estimated by counting the corpus the run trained on
  (`learning_benchmark.count_model_score`), its posterior scored exactly. Near the bound, the corpus holds
  the text to reach it and a model's gap is learning; far from it, the text falls short.

All figures but the model's are exact expectations over the chain; the model's score and its ratio are
on the run's held-out sample, as in the family table.

    python benchmarks/family_diagnosis.py --workdir /tmp/family --output benchmarks/family_diagnosis_results.txt

`--workdir` is a family run's (its `family_rows.jsonl`, and per language `data/spiece.model` and
`data/train.txt`).
"""

import argparse
import json
import os
import shlex
import sys
import time

import numpy as np

if __package__:  # imported as benchmarks.NAME, as the tests do
    from benchmarks import learning_benchmark as lb
    from benchmarks import results_table
else:  # run as a script: its own folder is on sys.path
    import learning_benchmark as lb
    import results_table


def corpus_stream(path, language):
    """The word indices of a run's training corpus; a word outside the language is an error naming it."""
    index = {word: i for i, word in enumerate(language.words)}
    with open(path) as f:
        words = f.read().split()
    unknown = sorted({w for w in words if w not in index})
    if unknown:
        raise ValueError(f"{path}: {len(unknown)} word(s) are not the language's, e.g. {unknown[:3]}; "
                         "is this the corpus of another language?")
    return np.array([index[w] for w in words], np.int64)


def diagnose_row(row, workdir):
    """One language's figures: exact entropies given parts of the blanket and the count model's score."""
    spec = row["language"]
    data = os.path.join(workdir, spec["name"], "data")
    for name in ("spiece.model", "train.txt"):
        if not os.path.exists(os.path.join(data, name)):
            raise ValueError(f"{os.path.join(data, name)} does not exist: the {spec['name']} row of "
                             f"{workdir}/family_rows.jsonl cannot be diagnosed without it.")
    language = lb.family_language(spec)
    counts = [len(s) for s in lb.spell_words(os.path.join(data, "spiece.model"), language.words)]
    count_score, weight = lb.count_model_score(language, corpus_stream(os.path.join(data, "train.txt"), language),
                                               counts)
    return {"name": spec["name"], "seed": row["seed"], "model": row["chain"],
            "model_ratio": row["chain"] / row["heldout_bound_given_pieces"],
            "bound": language.entropy_given((-2, -1, 1, 2), counts),
            "three": min(language.entropy_given((-2, -1, 1), counts), language.entropy_given((-1, 1, 2), counts)),
            "two": language.entropy_given((-1, 1), counts), "count_model": count_score, "weight": weight}


def format_diagnosis(diagnoses):
    """The diagnosis table, one row per language and seed."""
    lines = ["| language | seed | masked word, chain rule (/ held-out bound) | bound: all four neighbours "
             "| three | the two next to it | count model of the run's corpus | count model / bound | count weight |",
             "|---|---|---|---|---|---|---|---|---|"]
    for d in diagnoses:
        lines.append(f"| {d['name']} | {d['seed']} | {d['model']:.3f} ({d['model_ratio']:.2f}x) | {d['bound']:.3f} | "
                     f"{d['three']:.3f} | {d['two']:.3f} | {d['count_model']:.3f} | "
                     f"{d['count_model'] / d['bound']:.2f}x | {d['weight']:g} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", required=True, help="a learning_benchmark.py --family run's --workdir")
    parser.add_argument("--languages", nargs="+", help="only these languages' rows")
    parser.add_argument("--output", help="also prepend the table to this file, with the command as its title")
    results_table.add_arguments(parser)
    args = parser.parse_args(argv)
    rows_file = os.path.join(args.workdir, "family_rows.jsonl")
    if not os.path.exists(rows_file):
        sys.exit(f"--workdir: {rows_file} does not exist; give the --workdir of a learning_benchmark.py --family run.")
    with open(rows_file) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if args.languages:
        rows = [r for r in rows if r["language"]["name"] in args.languages]
    try:
        table = format_diagnosis([diagnose_row(row, args.workdir) for row in rows])
    except ValueError as error:
        sys.exit(f"--workdir {error}")
    print(table)
    if args.output:
        command = shlex.join(["python", "benchmarks/family_diagnosis.py"] + list(argv or sys.argv[1:]))
        lb.prepend_results(args.output, f"{time.strftime('%Y-%m-%d')}: {command}", table)
    return 0


def result_rows(section):
    """RESULTS.md rows of a diagnosis table: per language, its corpus's count model over the exact bound."""
    if "count model / bound" not in section.header:
        return []
    rows = {}
    for cells in section.rows:  # every seed of a language shares its corpus: one row
        rows.setdefault(cells["language"], results_table.Row(
            f"learning, count model of the {cells['language']} language's training corpus (family diagnosis): "
            "nats per masked word", "exact entropy bound", results_table.number(cells["count model / bound"]), "nats"))
    return list(rows.values())


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
