"""`loss.png`: the loss curve of a pretraining run with its reference lines, written atomically."""

import json
import math
import os

import numpy as np
import pytest

from xlnet_tf.pretraining.learning_report import reference_losses
from xlnet_tf.pretraining.loss_curve import (
    DPI,
    FIGURE_INCHES,
    LOSS_COLOR,
    REFERENCE_COLORS,
    LossCurvePlot,
    write_loss_curve,
)


def read_png(path):
    """`[H, W, 3]` floats in [0, 1]."""
    import matplotlib.image

    return matplotlib.image.imread(path)[..., :3]


def has_color(image, hex_color, tolerance=0.08):
    """Whether some pixel is within `tolerance` of `hex_color` in every channel."""
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)]) / 255.0
    return bool((np.abs(image - rgb).max(axis=-1) < tolerance).any())


def check_loss_curve(path):
    """Checks a loss.png: its size, that it is not blank, the loss line's colour; returns the image."""
    image = read_png(path)
    assert image.shape == (FIGURE_INCHES[1] * DPI, FIGURE_INCHES[0] * DPI, 3)
    rgb = (image * 255).round().astype(np.int64)
    colors = np.unique(rgb[..., 0] * 65536 + rgb[..., 1] * 256 + rgb[..., 2])
    assert len(colors) > 20  # Lines, text and antialiasing, not one flat colour.
    assert (image.min(axis=-1) < 0.9).mean() > 0.01  # More than a white page.
    assert has_color(image, LOSS_COLOR)
    assert not [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".tmp-")]
    return image


def _write_metrics(path, losses, first_step=10):
    records = [{"step": first_step + 10 * i, "loss": loss, "accuracy": 0.1} for i, loss in enumerate(losses)]
    with open(path, "w") as f:
        f.writelines(json.dumps(record) + "\n" for record in records)


def test_curve_with_both_reference_lines(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    _write_metrics(metrics, [8.3, 7.5, 6.8, 6.1, 5.9, 5.2])
    path = write_loss_curve(str(metrics), str(tmp_path / "loss.png"), reference_losses(4000, context_free=5.7))
    assert path == str(tmp_path / "loss.png")
    image = check_loss_curve(path)
    assert has_color(image, REFERENCE_COLORS[0]) and has_color(image, REFERENCE_COLORS[1])


def test_uniform_line_only_without_the_context_free_loss(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    _write_metrics(metrics, [3.7, 3.1])
    assert reference_losses(40) == {"uniform guessing": pytest.approx(math.log(40))}
    image = check_loss_curve(write_loss_curve(str(metrics), str(tmp_path / "loss.png"), reference_losses(40)))
    assert has_color(image, REFERENCE_COLORS[0]) and not has_color(image, REFERENCE_COLORS[1])


def test_nothing_logged_writes_nothing_and_a_torn_line_is_skipped(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    assert write_loss_curve(str(metrics), str(tmp_path / "loss.png")) is None
    metrics.write_text('{"step": 2, "accuracy": 0.5}\n{"step": 4, "lo')
    assert write_loss_curve(str(metrics), str(tmp_path / "loss.png")) is None
    assert not (tmp_path / "loss.png").exists()
    metrics.write_text('{"step": 2, "loss": 3.0}\n{"step": 4, "lo')
    check_loss_curve(write_loss_curve(str(metrics), str(tmp_path / "loss.png")))  # One point, drawn.


def test_callback_redraws_at_epoch_ends_at_most_every_few_seconds_and_at_the_end(tmp_path):
    metrics, png = tmp_path / "metrics.jsonl", tmp_path / "loss.png"
    _write_metrics(metrics, [4.0, 3.5])
    plot = LossCurvePlot(str(metrics), str(png), {"uniform guessing": 4.5}, every_seconds=3600)
    plot.on_epoch_end(0)
    first = png.read_bytes()
    _write_metrics(metrics, [4.0, 3.5, 3.0, 2.5])
    plot.on_epoch_end(1)  # Within every_seconds: not redrawn.
    assert png.read_bytes() == first
    plot.on_train_end()
    assert png.read_bytes() != first
