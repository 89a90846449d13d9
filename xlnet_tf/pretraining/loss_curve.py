"""The loss curve of a pretraining run: `loss.png` in its work directory, next to TensorBoard's `logs/`.

The curve is drawn from the run's `metrics.jsonl`, so a resumed run shows its
whole history, with dashed reference lines: uniform guessing (`log` of the
vocabulary size) always, and the loss of a model that ignores context when the
caller computed it (the quick start does; `xlnet-tf pretrain` does not, as it
takes a pass over every record). See `learning_report.reference_losses`.
"""

import io
import time

import keras

from xlnet_tf.storage import atomic_files
from xlnet_tf.training.callbacks import read_metrics

LOSS_CURVE_FILE = "loss.png"
# The figure's size in pixels: FIGURE_INCHES x DPI.
FIGURE_INCHES = (8, 5)
DPI = 100
LOSS_COLOR = "#1f77b4"
# One per reference line, in the order of `reference_losses`: uniform, context-free.
REFERENCE_COLORS = ("#d62728", "#2ca02c", "#9467bd", "#8c564b")


def loss_curve_png(steps, losses, references=None, *, title="Pretraining loss"):
    """A PNG of `losses` over `steps` with a dashed line per reference loss.

    Args:
        steps: optimizer steps, increasing.
        losses: the loss at each step (nats per predicted token).
        references: dict, label -> loss, drawn as horizontal lines.
        title: the figure's title.

    Returns:
        bytes, a PNG of `FIGURE_INCHES` x `DPI` pixels.

    Example:
    >>> png = loss_curve_png([10, 20, 30], [8.1, 6.9, 6.2], {"uniform guessing": 8.29})
    >>> png[:8]
    b'\\x89PNG\\r\\n\\x1a\\n'
    """
    # The Agg canvas draws without a display and without pyplot's global figure state.
    # import time: the CLI and every other path of the package start without matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    # import time: as above
    from matplotlib.figure import Figure

    figure = Figure(figsize=FIGURE_INCHES, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.plot(steps, losses, color=LOSS_COLOR, linewidth=2, marker="o" if len(steps) == 1 else None,
              label="training loss")
    for (label, value), color in zip((references or {}).items(), REFERENCE_COLORS):
        axes.axhline(value, color=color, linestyle="--", linewidth=1.5, label=f"{label} ({value:.2f})")
    axes.set_xlabel("optimizer step")
    axes.set_ylabel("loss (nats per predicted token)")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    # Below the axes: a legend inside would hide the reference lines or the curve's start.
    figure.legend(loc="outside lower center", ncols=3, frameon=False)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def write_loss_curve(metrics_path, png_path, references=None):
    """Draws the losses of `metrics_path` into `png_path` (atomically); None when no loss is logged yet.

    Args:
        metrics_path: the run's `metrics.jsonl`.
        png_path: where the PNG goes (local, `gs://`, ...).
        references: dict, label -> loss, as for `loss_curve_png`.

    Returns:
        `png_path`, or None when nothing was written.

    Example:
    >>> write_loss_curve("runs/tiny/metrics.jsonl", "runs/tiny/loss.png",
    ...                  {"uniform guessing": 8.29})  # doctest: +SKIP
    'runs/tiny/loss.png'
    """
    records = [record for record in read_metrics(metrics_path) if "loss" in record and "step" in record]
    if not records:
        return None
    png = loss_curve_png([r["step"] for r in records], [r["loss"] for r in records], references)
    return atomic_files.write_bytes(png_path, png)


class LossCurvePlot(keras.callbacks.Callback):
    """Redraws the run's loss curve at the end of training and at epoch ends (at most every `every_seconds`).

    Place it after the `JsonlMetricsLogger` that writes `metrics_path`, so an
    epoch's last line is in the file when the curve is drawn.

    Args:
        metrics_path: the run's `metrics.jsonl`.
        png_path: the curve's file, `workdir/loss.png`.
        references: dict, label -> loss, drawn as dashed lines.
        every_seconds: the least time between two epoch-end drawings.

    Example:
    >>> plot = LossCurvePlot("runs/tiny/metrics.jsonl", "runs/tiny/loss.png",
    ...                      {"uniform guessing": 8.29})
    >>> model.fit(dataset, epochs=3, callbacks=[metrics_logger, plot])  # doctest: +SKIP
    """

    def __init__(self, metrics_path, png_path, references=None, *, every_seconds=30.0):
        super().__init__()
        self.metrics_path = metrics_path
        self.png_path = png_path
        self.references = dict(references or {})
        self.every_seconds = every_seconds
        self._drawn = None

    def on_epoch_end(self, epoch, logs=None):
        if self._drawn is None or time.time() - self._drawn >= self.every_seconds:
            self._draw()

    def on_train_end(self, logs=None):
        self._draw()

    def _draw(self):
        write_loss_curve(self.metrics_path, self.png_path, self.references)
        self._drawn = time.time()
