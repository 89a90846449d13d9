"""Every Keras backend side by side: our XLNet-Base on TensorFlow, JAX and PyTorch next to Hugging Face's.

Three paths, each measured in a fresh process per implementation (so the peak
RSS, `ru_maxrss`, belongs to that measurement alone), on the same random
XLNet-Base weights shape (no download) and the same inputs:

- `infer`: the backbone's `predict_on_batch` on token ids, L=128, B=4, next to
  Hugging Face's `XLNetModel` forward (eval, no grad);
- `fit`: one `train_on_batch` of `XLNetClassifier` (dropout 0.1, AdamW), L=128,
  B=4, next to Hugging Face's `XLNetForSequenceClassification` forward, backward
  and `torch.optim.AdamW` step;
- `generate`: greedy `XLNetCausalLM.generate` of 16 new tokens after a 64-token
  prompt (cached mode), batch 1, next to Hugging Face's `generate` with mems;
- `pretrain`: one permutation-LM `train_on_batch` of `XLNetPretrainer` (two
  streams: a random factorization order as `perm_mask`, P=L/4 targets through
  `target_mapping`; AdamW, dropout 0.1) at L=128, B=4, next to Hugging Face's
  `XLNetLMHeadModel` with the same `perm_mask`/`target_mapping`, forward,
  backward and `torch.optim.AdamW` step.

`--size base` (default) measures XLNet-Base's shapes; `--size tiny` the model
of the quick start's `configs/pretrain/tiny.yaml`.

Implementations: `hf` (Hugging Face PyTorch, eager; runs first and again last,
its faster run counts), `tensorflow`, `jax`, `torch` (ours, `KERAS_BACKEND`
set in the child), and with `--before PATH` (a checkout of an earlier commit,
e.g. `git worktree add /tmp/before <commit>`) `tensorflow-before`, ours on
TensorFlow from that checkout: the TensorFlow backend's before/after figure in
the same run. Each row is the fastest of `--steps` timed calls after two
untimed ones (load only slows a step down); the ratio is the implementation's
step time over Hugging Face's (below 1: ours faster). Every side gets the same
threads (intra-op `--threads`, inter-op 1; OpenMP waits passively).

Usage:
    python benchmarks/backend_benchmark.py [--paths infer fit generate] [--steps 3] [--before /tmp/before]
        [--implementations hf tensorflow jax torch] [--size base|tiny]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import measurement, results_table  # noqa: E402

# A child measuring `tensorflow-before` imports `xlnet_tf` from the checkout this variable names.
CHECKOUT_VARIABLE = "XLNET_TF_BENCHMARK_CHECKOUT"
if os.environ.get(CHECKOUT_VARIABLE):
    sys.path.insert(0, os.environ[CHECKOUT_VARIABLE])

SIZES = ("base", "tiny")
SEQUENCE, BATCH = 128, 4
PROMPT, NEW_TOKENS = 64, 16
NUM_PREDICT = SEQUENCE // 4
PATHS = ("infer", "fit", "generate", "pretrain")
OURS = ("tensorflow", "jax", "torch")
LABELS = {"hf": "Hugging Face PyTorch (eager)", "tensorflow": "ours, TensorFlow", "jax": "ours, JAX",
          "torch": "ours, PyTorch", "tensorflow-before": "ours, TensorFlow, before (--before)"}


def model_size(size):
    """`XLNetConfig`'s size keys of `size`: XLNet-Base's, or the quick start's tiny model (its shipped config)."""
    if size == "base":
        return dict(measurement.XLNET_BASE)
    import yaml

    with open(os.path.join(measurement.REPO, "configs", "pretrain", "tiny.yaml"), encoding="utf-8") as stream:
        model = yaml.safe_load(stream)["model"]
    return {key: model[key] for key in measurement.XLNET_BASE}


def _inputs(path, size):
    import numpy as np

    rng = np.random.default_rng(0)
    if path == "generate":
        return rng.integers(9, size["vocabulary_size"], (1, PROMPT)).astype("int32")
    return rng.integers(9, size["vocabulary_size"], (BATCH, SEQUENCE)).astype("int32")


def permutation_inputs(ids):
    """A random factorization order's `perm_mask` `[B, L, L]`, the last `NUM_PREDICT` positions as targets
    (`target_mapping` `[B, P, L]`) and their ids `[B, P]`, as XLNet's pretraining feeds them."""
    import numpy as np

    rng = np.random.default_rng(1)
    batch, length = ids.shape
    perm_mask = np.zeros((batch, length, length), "float32")
    for row in range(batch):
        rank = np.empty(length, "int64")
        rank[rng.permutation(length)] = np.arange(length)
        perm_mask[row] = (rank[None, :] >= rank[:, None]).astype("float32")  # i may not see j at or after it
    target_mapping = np.zeros((batch, NUM_PREDICT, length), "float32")
    positions = np.arange(length - NUM_PREDICT, length)
    target_mapping[:, np.arange(NUM_PREDICT), positions] = 1.0
    return perm_mask, target_mapping, ids[:, positions]


def ours_step(path, size_name="base"):
    """One call of ours on the backend `KERAS_BACKEND` names, ready to time."""
    import keras
    import numpy as np

    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_config import XLNetConfig

    keras.utils.set_random_seed(0)
    size = model_size(size_name)
    ids = _inputs(path, size)
    if path == "infer":
        backbone = XLNetBackbone(XLNetConfig(**size, dropout=0.0, attention_dropout=0.0))
        features = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
        return lambda: backbone.predict_on_batch(features)
    if path == "fit":
        from xlnet_tf.models.xlnet_classifier import XLNetClassifier

        model = XLNetClassifier(XLNetBackbone(XLNetConfig(**size)), num_classes=2, preprocessor=None)
        model.compile(optimizer=keras.optimizers.AdamW(1e-5),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        features = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
        labels = np.arange(BATCH, dtype="int32") % 2
        return lambda: model.train_on_batch(features, labels)
    if path == "pretrain":
        from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

        pretrainer = XLNetPretrainer(XLNetBackbone(XLNetConfig(**size, memory_length=0, bi_data=False)))
        pretrainer.compile(optimizer=keras.optimizers.AdamW(1e-5))
        perm_mask, target_mapping, target_ids = permutation_inputs(ids)
        batch = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids),
                 "perm_mask": perm_mask, "target_mapping": target_mapping, "target_ids": target_ids,
                 "target_mask": np.ones(target_ids.shape, "float32")}
        return lambda: pretrainer.train_on_batch(batch)
    from xlnet_tf.models.xlnet_causal_lm import XLNetCausalLM

    model = XLNetCausalLM(XLNetBackbone(XLNetConfig(**size, dropout=0.0, attention_dropout=0.0)), mode="cached")
    width = PROMPT + NEW_TOKENS
    token_ids = np.concatenate([ids, np.full((1, NEW_TOKENS), 5, "int32")], axis=1)  # [1, P + N]
    mask = (np.arange(width) < PROMPT)[None].astype("int32")  # [1, P + N]
    return lambda: model.generate({"token_ids": token_ids, "padding_mask": mask}, stop_token_ids=None)


def hugging_face_step(path, torch, size_name="base"):
    """One call of Hugging Face's, ready to time."""
    import transformers

    size = model_size(size_name)
    ids = torch.tensor(_inputs(path, size), dtype=torch.long)
    if path == "infer":
        model = transformers.XLNetModel(measurement.hugging_face_config(size, dropout=0.0)).eval()

        def infer():
            with torch.no_grad():
                model(ids)
        return infer
    if path == "fit":
        model = transformers.XLNetForSequenceClassification(
            measurement.hugging_face_config(size, dropout=0.1, num_labels=2)).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        labels = torch.arange(BATCH) % 2

        def fit():
            optimizer.zero_grad()
            model(ids, labels=labels).loss.backward()
            optimizer.step()
        return fit
    if path == "pretrain":
        model = transformers.XLNetLMHeadModel(measurement.hugging_face_config(size, dropout=0.1, mem_len=None)).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        perm_mask, target_mapping, target_ids = (torch.tensor(value) for value in permutation_inputs(ids.numpy()))
        target_ids = target_ids.long()

        def pretrain():
            optimizer.zero_grad()
            logits = model(ids, perm_mask=perm_mask, target_mapping=target_mapping, use_mems=False).logits
            torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target_ids.reshape(-1)).backward()
            optimizer.step()
        return pretrain
    model = transformers.XLNetLMHeadModel(measurement.hugging_face_config(size, dropout=0.0, mem_len=None)).eval()

    def generate():
        with torch.no_grad():
            model.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                           use_mems=True, pad_token_id=5, eos_token_id=None)
    return generate


def child(spec):
    """Builds one implementation's step for one path, warms it up, times it; reports the fastest step."""
    try:
        if spec["implementation"] == "hf":
            step = hugging_face_step(spec["path"], measurement.limit_torch_threads(spec["threads"]), spec["size"])
        else:
            if spec["implementation"] in ("tensorflow", "tensorflow-before"):
                measurement.limit_tensorflow_threads(spec["threads"])
            elif spec["implementation"] == "torch":
                measurement.limit_torch_threads(spec["threads"])
            step = ours_step(spec["path"], spec["size"])
        measurement.time_calls(step, 2)
        seconds = measurement.time_calls(step, spec["steps"])
        measurement.report({"seconds": min(seconds), "peak_rss_gb": measurement.peak_rss_bytes() / 1e9})
    except Exception as error:  # noqa: BLE001 - the driver prints it in the table
        measurement.report_error(error)


def measure(implementation, path, args):
    """One implementation on one path, in a fresh process with its backend and checkout."""
    spec = {"implementation": implementation, "path": path, "steps": args.steps, "threads": args.threads,
            "size": args.size}
    backend = "tensorflow" if implementation in ("hf", "tensorflow-before") else implementation
    variables = dict(measurement.PASSIVE_WAIT, KERAS_BACKEND=backend, XLA_FLAGS="")
    if implementation == "tensorflow-before":
        # The child imports `xlnet_tf` from the earlier checkout (see the top of this file).
        variables[CHECKOUT_VARIABLE] = os.path.abspath(args.before)
    return measurement.measure_in_child(measurement.child_command(__file__, spec),
                                        measurement.child_env(args.threads, **variables), timeout=1800)


def table(results, paths, implementations, size):
    lines = ["| model | path | implementation | step s | x Hugging Face's time | peak RSS GB |",
             "|---|---|---|---|---|---|"]
    for path in paths:
        reference = min((r["seconds"] for r in results[path].get("hf", []) if "seconds" in r), default=None)
        for implementation in implementations:
            runs = [r for r in results[path].get(implementation, []) if "seconds" in r]
            if not runs:
                errors = [r.get("error", "") for r in results[path].get(implementation, [])]
                failure = "; ".join(errors)[:200]
                lines.append(f"| {size} | {path} | {LABELS[implementation]} | failed: {failure} | - | - |")
                continue
            best = min(runs, key=lambda r: r["seconds"])
            ratio = f"**{best['seconds'] / reference:.2f}x**" if reference else "-"
            lines.append(f"| {size} | {path} | {LABELS[implementation]} | {best['seconds']:.3f} | {ratio} | "
                         f"{best['peak_rss_gb']:.2f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument("--implementations", nargs="+", choices=("hf", *OURS), default=["hf", *OURS])
    parser.add_argument("--before", default=None, help="a checkout of an earlier commit: adds tensorflow-before")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--size", choices=SIZES, default="base",
                        help="XLNet-Base's shapes, or the quick start's tiny model (configs/pretrain/tiny.yaml)")
    parser.add_argument("--threads", type=int, default=2)
    args = results_table.parse_arguments(parser, argv, child)
    if args is None:
        return 0
    implementations = [name for name in args.implementations if name != "hf"]
    if args.before:
        implementations.append("tensorflow-before")
    results = {}
    for path in args.paths:
        results[path] = {}
        order = ["hf", *implementations, "hf"] if "hf" in args.implementations else implementations
        for implementation in order:
            result = measure(implementation, path, args)
            results[path].setdefault(implementation, []).append(result)
            print(f"{path} {implementation}: {result}", flush=True)
    model = "XLNet-Base" if args.size == "base" else "the tiny model of configs/pretrain/tiny.yaml"
    print(f"\n{model}, {args.threads} threads, fastest of {args.steps} steps per process; infer/fit/pretrain at "
          f"L={SEQUENCE} B={BATCH} (pretrain: P={NUM_PREDICT}), generate {NEW_TOKENS} tokens after {PROMPT} "
          f"(batch 1, cached)\n")
    print(table(results, args.paths, ["hf", *implementations], args.size))
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")
    return 0


def result_rows(section):
    rows = []
    for row in section.rows:
        ratio = results_table.number(row.get("x Hugging Face's time", ""))
        if ratio is None or "Hugging Face" in row["implementation"]:
            continue
        name = f"backend {row['path']}" + (f" ({row['model']})" if row.get("model", "base") != "base" else "")
        rows.append(results_table.Row(f"{name}: {row['implementation']}", "Hugging Face PyTorch",
                                      ratio, "time"))
    return rows


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
