"""Where the XLA training step loses to the non-XLA one: each piece timed both ways in one process.

For one model (default 4 layers x 768, the width of XLNet-Base, vocabulary 32000), one sequence length and one
dtype, the script times, alternating within every round, a `tf.function` without and with
`jit_compile=True` of:

  content    backbone forward, content stream only, inference;
  two_stream the pretraining forward (perm_mask, target_mapping with 85 predictions per 512, memory 3L/4
             reused at L/2, dropout 0.1 from a step seed) up to the logits and the loss;
  fwd_bwd    the same plus the gradients of every variable (backward = fwd_bwd - two_stream);
  optimizer  the AdamW update (`build_optimizer`: `AllReducedAdamW`, fused) with fixed gradients;
  memory     the recurrence-memory read and write of a step;
  step       `XLNetPretrainer.train_step` (what `fit` runs), all of the above;
  matmul     one `[B*L, H] x [H, 4H]` matmul, in the compute dtype: the codegen of a dot alone.

Each figure is the minimum over `--rounds` rounds (the first call, with tracing and compilation, is excluded):
the machine is shared, and load only slows a call down. Read the XLA / no-XLA column; compare numbers only
within one run.

Usage:
    python benchmarks/xla_step_profile.py [--seq 128] [--batch 2] [--dtype float32|bfloat16]
        [--layers 4] [--rounds 5] [--threads 2] [--pieces content,two_stream,...]

`XLA_FLAGS=--xla_dump_to=/tmp/xla_dump --xla_dump_hlo_as_text` next to it dumps what XLA compiled.
"""

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import measurement  # noqa: E402
import results_table  # noqa: E402

PIECES = ("matmul", "content", "two_stream", "fwd_bwd", "optimizer", "memory", "step")


def build(args):
    import keras
    import tensorflow as tf

    from benchmarks.pretraining_benchmark import make_batch
    from xlnet_tf.models.xlnet_backbone import XLNetBackbone
    from xlnet_tf.models.xlnet_config import XLNetConfig
    from xlnet_tf.models.xlnet_pretrainer import XLNetPretrainer
    from xlnet_tf.optimizers import build_optimizer

    keras.utils.set_random_seed(0)
    length, batch = args.seq, args.batch
    config = XLNetConfig(**dict(measurement.XLNET_BASE, num_layers=args.layers), dropout=0.1, attention_dropout=0.1,
                         memory_length=3 * length // 4, reuse_length=length // 2)
    dtype = "mixed_bfloat16" if args.dtype == "bfloat16" else None
    model = XLNetPretrainer(XLNetBackbone(config, dtype=dtype))
    model.compile(optimizer=build_optimizer(model, learning_rate=1e-4, warmup_steps=1, train_steps=1000))
    model.optimizer.build(model.trainable_variables)
    model.enable_recurrence_memory(batch)
    data = {k: tf.constant(v) for k, v in make_batch(batch, length).items()}
    return model, data


def make_pieces(model, data, args):
    import tensorflow as tf

    from xlnet_tf.layers.seeded_dropout import training_dropout_seed

    backbone = model.backbone
    content_inputs = {k: data[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    features = {k: data[k] for k in ("token_ids", "segment_ids", "padding_mask", "perm_mask",
                                     "target_mapping")}
    memory = model.recurrence_memory
    variables = model.trainable_variables

    def loss_of():
        outputs = model(dict(features, mems=memory.read()), training=True,
                        dropout_seed=training_dropout_seed(model, True))
        per_token, _, mask = model._masked_sums(data["target_ids"], data["target_mask"], outputs["logits"])
        return tf.reduce_sum(per_token * mask) / tf.reduce_sum(mask), outputs

    def content():
        return backbone(content_inputs, training=False)["sequence_output"]

    def two_stream():
        return loss_of()[0]

    def fwd_bwd():
        with tf.GradientTape() as tape:
            loss, _ = loss_of()
        # One scalar out: returning ~60 gradients would time their copies out of the function.
        return tf.linalg.global_norm(tape.gradient(loss, variables))

    gradients = [tf.random.normal(v.shape, stddev=1e-3, dtype=v.dtype) for v in variables]

    def optimizer():
        model.optimizer.apply(gradients, variables)
        return model.optimizer.iterations

    mems_value = tf.random.normal(memory.shape, dtype=memory.dtype)

    def memory_update():
        value = memory.read()
        return memory.write(mems_value + value[:1, :1, :1, :1])

    def step():
        return model.train_step(data)["loss"]

    hidden = tf.random.normal((args.batch * args.seq, 768), dtype=backbone.compute_dtype)
    kernel = tf.random.normal((768, 3072), dtype=backbone.compute_dtype)

    def matmul():
        return tf.matmul(hidden, kernel)

    return {"matmul": matmul, "content": content, "two_stream": two_stream, "fwd_bwd": fwd_bwd,
            "optimizer": optimizer, "memory": memory_update, "step": step}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=None, help="default: 2 at seq <= 128, else 1")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pieces", default=",".join(PIECES))
    results_table.add_arguments(parser)
    args = parser.parse_args()
    args.batch = args.batch or (2 if args.seq <= 128 else 1)
    pieces = [p for p in args.pieces.split(",") if p]
    unknown = sorted(set(pieces) - set(PIECES))
    if unknown:
        parser.error(f"unknown piece(s) {unknown}; choose from {PIECES}")

    tf = measurement.limit_tensorflow_threads(args.threads)
    model, data = build(args)
    bodies = make_pieces(model, data, args)
    functions = {(p, xla): tf.function(bodies[p], jit_compile=xla) for p in pieces for xla in (False, True)}
    best = {}
    for round_index in range(args.rounds + 1):
        for piece in pieces:
            for xla in (False, True):
                start = time.perf_counter()
                tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t,
                                      functions[piece, xla]())
                elapsed = time.perf_counter() - start
                if round_index:  # round 0 traces and compiles
                    best[piece, xla] = min(best.get((piece, xla), elapsed), elapsed)
    print(f"layers {args.layers} x 768, seq {args.seq}, batch {args.batch}, {args.dtype}, "
          f"{args.threads} threads, min of {args.rounds} rounds, load average "
          f"{os.getloadavg()[0]:.1f}")
    print("| piece | no XLA ms | XLA ms | XLA / no XLA time |")
    print("|---|---|---|---|")
    for piece in pieces:
        plain, xla = best[piece, False] * 1e3, best[piece, True] * 1e3
        print(f"| {piece} | {plain:.1f} | {xla:.1f} | {xla / plain:.2f}x |")
    if "fwd_bwd" in pieces and "two_stream" in pieces:
        plain = (best["fwd_bwd", False] - best["two_stream", False]) * 1e3
        xla = (best["fwd_bwd", True] - best["two_stream", True]) * 1e3
        print(f"| backward (fwd_bwd - two_stream) | {plain:.1f} | {xla:.1f} | {xla / plain:.2f}x |")


def result_rows(section):
    """RESULTS.md rows: XLA / no XLA time of the whole train step and of one matmul."""
    if "XLA / no XLA time" not in section.header:
        return []
    size = re.search(r"layers (\d+) x 768, seq (\d+), batch (\d+), (\w+)", section.context)
    what = f"{size.group(1)} layers x 768, seq {size.group(2)}, batch {size.group(3)}, {size.group(4)}" if size else ""
    return [results_table.Row(f"XLA:CPU profile, {what}: {cells['piece']} with XLA / without", "ours without XLA",
                              results_table.number(cells["XLA / no XLA time"]), "time")
            for cells in section.rows if cells["piece"] in ("step", "matmul")]


if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
