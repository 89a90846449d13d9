"""Training progress when the output is not a terminal: one plain line per log interval.

Keras' progress bar redraws itself with carriage returns and colour codes. Sent to a
file (`xlnet-tf quickstart > log.txt`, CI, `nohup`), every redraw lands on one line, so
off a terminal the commands turn the bar off (`training.verbose=0`) and print
`step 40/100  loss 5.1234  accuracy 0.0812` lines instead, at the run's
`training.log_every_steps`.

Example:
>>> import io
>>> from xlnet_tf.cli.plain_progress import progress_overrides
>>> progress_overrides([], stream=io.StringIO())  # not a terminal: the bar goes off
['training.verbose=0']
>>> progress_overrides(["training.verbose=1"], stream=io.StringIO())  # the user's choice stands
[]
"""

import sys
import time

VERBOSE_KEY = "training.verbose"


def is_terminal(stream=None):
    """Whether `stream` (default: stdout) is an interactive terminal."""
    stream = sys.stdout if stream is None else stream
    return bool(getattr(stream, "isatty", None) and stream.isatty())


def progress_overrides(overrides, stream=None):
    """The `--set` overrides that turn Keras' progress bar off when `stream` is not a terminal.

    Args:
        overrides: the run's own `section.key=value` overrides; one that sets `training.verbose` wins.
        stream: where the run prints (default: stdout).

    Returns:
        `["training.verbose=0"]` off a terminal, else `[]`.
    """
    if is_terminal(stream) or any(o.partition("=")[0].strip() == VERBOSE_KEY for o in overrides):
        return []
    return [f"{VERBOSE_KEY}=0"]


def plain_progress(steps_per_epoch, train_steps, every_steps, micro_batches_per_step=1, stream=None):
    """A Keras callback printing `step N/TOTAL  loss ...  accuracy ...` every `every_steps` optimizer steps.

    Args:
        steps_per_epoch: optimizer steps per Keras epoch (`training.steps_per_epoch`).
        train_steps: the run's last step (`training.train_steps`), shown as the total.
        every_steps: print when the step is a multiple of this (`training.log_every_steps`), and at the last step.
        micro_batches_per_step: `fit` batches per optimizer step (`training.gradient_accumulation_steps`).
        stream: where to print (default: stdout).

    Returns:
        A `keras.callbacks.Callback`.

    Example:
    >>> import io
    >>> from xlnet_tf.cli.plain_progress import plain_progress
    >>> out = io.StringIO()
    >>> callback = plain_progress(steps_per_epoch=4, train_steps=8, every_steps=2, stream=out)
    >>> callback.on_train_begin()
    >>> for batch in range(4):
    ...     callback.on_train_batch_end(batch, {"loss": 5.0 - batch, "accuracy": 0.25})
    >>> print(out.getvalue().split("  ")[:3])
    ['step 2/8', 'loss 4.0000', 'accuracy 0.2500']
    """
    import keras  # import time: `--help` and argument errors answer without Keras

    # import time: the callbacks module loads TensorFlow
    from xlnet_tf.training.callbacks import optimizer_step

    class PlainProgress(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self._epoch, self._start = 0, time.time()

        def on_epoch_begin(self, epoch, logs=None):
            self._epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            step = optimizer_step(self._epoch, batch, steps_per_epoch, micro_batches_per_step)
            if step is None or (step % every_steps and step != train_steps):
                return
            values = "".join(f"  {key} {float(value):.4f}" for key, value in (logs or {}).items()
                             if _is_number(value))
            print(f"step {step}/{train_steps}{values}  ({time.time() - self._start:.0f}s)",
                  file=stream or sys.stdout, flush=True)

    return PlainProgress()


def run_progress_callbacks(config, added_overrides):
    """`[plain_progress(...)]` for a run whose bar `progress_overrides` turned off (`added_overrides`), else `[]`."""
    if not added_overrides:
        return []
    t = config.training
    return [plain_progress(t.steps_per_epoch, t.train_steps, t.log_every_steps,
                           micro_batches_per_step=t.gradient_accumulation_steps)]


def _is_number(value):
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
