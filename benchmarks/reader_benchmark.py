"""Pretraining reader throughput next to what a training step consumes, in one run.

For each setting (the paper's seq 512 / reuse 256 / 85 predictions / perm 256 / bi_data,
and the quick-start tiny config at seq 128) it measures, on this machine:
- reader: examples/s of `xlnet_tf.data.pretraining_dataset` (read records, cut rows,
  A/B, span masking, permutation masks, batching), after a warm-up;
- step: seconds of one training step (forward + backward + AdamW update, with recurrence
  memory as input) of the matching model (XLNet-Base for seq 512, the tiny config for
  seq 128) at the same per-replica batch; demand = batch / step seconds examples/s;
- ratio = reader supply / step demand (> 1: the input pipeline keeps up).

With `--step-seconds S` the step is not measured; demand = batch / S (e.g. a TPU step
time). On an accelerator each input pipeline (host) feeds its local replicas: demand per
host = per-replica batch x local replicas / step seconds.

The records are synthetic: Zipf-distributed ids, sentences of 8..40 tokens, documents of
100..2000 tokens ending in <eod>, written in the v1 record format with chunk_length 512.

    python benchmarks/reader_benchmark.py [--tokens 3000000] [--batches 20] [--skip-step]
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import measurement  # noqa: E402
import results_table  # noqa: E402

SETTINGS = {
    # name: (seq, reuse, num_predict, perm, per-replica batch, model)
    "paper seq512 (Base)": (512, 256, 85, 256, 8, "base"),
    "tiny seq128": (128, 64, 21, 64, 16, "tiny"),
}


def write_synthetic_records(directory, num_tokens, num_shards=4, chunk_length=512, seed=0):
    """Synthetic shards in the v1 format, through the one v1 writer (`tests/harness.py`)."""
    from tests.harness import write_pretraining_records
    from xlnet_tf.formats.special_tokens import EOD_TOKEN_ID, SPECIAL_PIECES

    rng = np.random.default_rng(seed)
    streams = []
    per_shard = num_tokens // num_shards
    for _ in range(num_shards):
        tokens, sentences, bit = [], [], 0
        while len(tokens) < per_shard:
            doc_left = int(rng.integers(100, 2000))
            while doc_left > 0:
                n = int(min(rng.integers(8, 41), doc_left))
                ids = rng.zipf(1.2, n) % (32000 - 1 - len(SPECIAL_PIECES)) + len(SPECIAL_PIECES)
                tokens.extend(ids.tolist())
                sentences.extend([bit] * n)
                bit ^= 1
                doc_left -= n
            tokens.append(EOD_TOKEN_ID)
            sentences.append(bit)
            bit ^= 1
        streams.append((tokens, sentences))
    write_pretraining_records(directory, streams, chunk_length, vocabulary_size=32000)


def measure_reader(directory, seq, reuse, num_predict, perm, batch, batches, warmup=3):
    from xlnet_tf.data.pretraining import pretraining_dataset

    t0 = time.perf_counter()
    dataset = pretraining_dataset(directory, sequence_length=seq, reuse_length=reuse, num_predict=num_predict,
                                  perm_size=perm, batch_size=batch, bi_data=True, seed=0,
                                  sentencepiece_model=None)
    iterator = iter(dataset)
    for _ in range(warmup):
        next(iterator)
    startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(batches):
        batch_value = next(iterator)
    elapsed = time.perf_counter() - t0
    return batch * batches / elapsed, startup, batch_value


def measure_step(model, batch_value, steps=3, step_batch=None):
    import keras
    import tensorflow as tf

    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer

    if model == "base":
        config = XLNetConfig(**measurement.XLNET_BASE, activation="gelu_approximate", memory_length=384,
                             reuse_length=256, bi_data=True)
    else:
        config = XLNetConfig(vocabulary_size=4000, num_layers=4, num_heads=4, head_dim=32, hidden_dim=128,
                             intermediate_dim=512, activation="gelu", memory_length=64, reuse_length=64,
                             bi_data=True)
    pretrainer = XLNetPretrainer(XLNetBackbone(config))
    optimizer = keras.optimizers.AdamW(learning_rate=1e-4, epsilon=1e-6)
    optimizer.build(pretrainer.trainable_variables)
    if step_batch:
        batch_value = {k: v[:step_batch] for k, v in batch_value.items()}
    features = {k: v for k, v in batch_value.items() if k not in ("target_ids", "target_mask")}
    if model != "base":
        features["token_ids"] = features["token_ids"] % config.vocabulary_size
    batch = int(features["token_ids"].shape[0])
    features["mems"] = tf.zeros([batch, config.num_layers, config.memory_length, config.hidden_dim])
    target_ids = batch_value["target_ids"] % config.vocabulary_size
    target_mask = batch_value["target_mask"]

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = pretrainer(features, training=True)["logits"]
            loss = keras.losses.sparse_categorical_crossentropy(target_ids, logits, from_logits=True)  # [B, P]
            loss = tf.reduce_sum(loss * target_mask) / tf.maximum(tf.reduce_sum(target_mask), 1.0)
        variables = pretrainer.trainable_variables
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    step()  # trace and warm up
    return sum(measurement.time_calls(lambda: step().numpy(), steps)) / steps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=3_000_000, help="synthetic corpus size")
    parser.add_argument("--batches", type=int, default=20, help="batches timed per setting")
    parser.add_argument("--step-seconds", type=float, default=None, help="use this step time instead of measuring")
    parser.add_argument("--skip-step", action="store_true", help="report reader figures only")
    parser.add_argument("--steps", type=int, default=3, help="training steps timed")
    parser.add_argument("--step-batch", type=int, default=2,
                        help="batch of the measured Base step (seq 512 Base at batch 8 needs > 20 GB); "
                             "demand is examples/s at that batch")
    results_table.add_arguments(parser)
    args = parser.parse_args(argv)

    import tensorflow as tf

    tmp = tempfile.mkdtemp(prefix="reader_bench_")
    try:
        t0 = time.perf_counter()
        write_synthetic_records(tmp, args.tokens)
        print(f"synthetic records: {args.tokens} tokens in {time.perf_counter() - t0:.1f}s; "
              f"CPU cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, TF {tf.__version__}")
        rows = []
        for name, (seq, reuse, num_predict, perm, batch, model) in SETTINGS.items():
            supply, startup, batch_value = measure_reader(tmp, seq, reuse, num_predict, perm, batch, args.batches)
            batch_value = {k: v.numpy() for k, v in batch_value.items()}
            if args.skip_step:
                step_s = None
            elif args.step_seconds:
                step_s = args.step_seconds
            else:
                step_batch = args.step_batch if model == "base" else None
                step_s = measure_step(model, batch_value, steps=args.steps, step_batch=step_batch)
            step_examples = args.step_batch if (model == "base" and not args.step_seconds) else batch
            demand = None if step_s is None else step_examples / step_s
            rows.append((name, batch, supply, supply * seq, startup, step_s, step_examples, demand))
        print()
        print("| setting | reader batch | reader examples/s | reader tokens/s | reader start-up s "
              "| train step s (batch) | step demand examples/s | supply / demand |")
        print("|---|---|---|---|---|---|---|---|")
        for name, batch, supply, tokens, startup, step_s, step_examples, demand in rows:
            step_text = "-" if step_s is None else f"{step_s:.2f} ({step_examples})"
            demand_text = "-" if demand is None else f"{demand:.2f}"
            ratio = "-" if demand is None else f"{supply / demand:.1f}x"
            print(f"| {name} | {batch} | {supply:.1f} | {tokens:,.0f} | {startup:.1f} | {step_text} "
                  f"| {demand_text} | {ratio} |")
        print("\nDemand per input pipeline on accelerators = per-replica batch x local replicas / step seconds;"
              " e.g. 8 replicas x 16 examples / 0.5 s = 256 examples/s.")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def result_rows(section):
    """RESULTS.md rows: the reader's examples/s over a training step's demand, per setting."""
    if "supply / demand" not in section.header:
        return []
    rows = []
    for cells in results_table.measured(section, "supply / demand"):  # --skip-step: no demand to compare with
        seconds, batch = cells["train step s (batch)"].rstrip(")").split(" (")
        rows.append(results_table.Row(
            f"pretraining reader, {cells['setting']}: examples/s / one replica's demand at batch {batch}, "
            f"{seconds} s a step", "training step demand", results_table.number(cells["supply / demand"]), "speed"))
    return rows


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
