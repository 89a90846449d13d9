"""Linear warmup followed by linear or polynomial decay."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="xlnet_tf")
class WarmupDecaySchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Learning rate that rises linearly, then decays polynomially to `end_learning_rate`.

    With `power=1` this is the linear decay of the XLNet paper. The schedule is
    indexed by optimizer updates: when gradients are accumulated over
    `accumulation_steps` micro-batches, Keras' `optimizer.iterations` counts
    micro-batches and the schedule divides it back.

    Args:
        peak_learning_rate: rate reached at the end of warmup.
        warmup_steps: updates of linear warmup from 0.
        decay_steps: total updates; the rate reaches `end_learning_rate` here.
        end_learning_rate: final rate.
        power: polynomial power of the decay (1.0 = linear).
        accumulation_steps: micro-batches per optimizer update.

    Example:
    >>> from xlnet_tf.optimizers import WarmupDecaySchedule
    >>> schedule = WarmupDecaySchedule(1e-3, warmup_steps=10, decay_steps=110)
    >>> round(float(schedule(5)), 7), round(float(schedule(60)), 7)  # half way up, half way down
    (0.0005, 0.0005)
    """

    def __init__(self, peak_learning_rate, warmup_steps, decay_steps,
                 end_learning_rate=0.0, power=1.0, accumulation_steps=1):
        if warmup_steps < 0 or decay_steps <= 0 or warmup_steps > decay_steps:
            raise ValueError(
                f"Need 0 <= warmup_steps <= decay_steps and decay_steps > 0; got "
                f"warmup_steps={warmup_steps}, decay_steps={decay_steps}.")
        if accumulation_steps < 1:
            raise ValueError(f"accumulation_steps must be >= 1, got {accumulation_steps}.")
        # Plain Python numbers: `get_config` writes them to JSON as they are.
        self.peak_learning_rate, self.end_learning_rate = float(peak_learning_rate), float(end_learning_rate)
        self.warmup_steps, self.decay_steps = int(warmup_steps), int(decay_steps)
        self.power, self.accumulation_steps = float(power), int(accumulation_steps)

    def __call__(self, step):
        # JAX has int64 only under `jax_enable_x64` (it would warn and truncate); int32 counts 2**31 updates.
        integer = "int32" if keras.config.backend() == "jax" else "int64"
        step = ops.cast(ops.floor_divide(ops.cast(step, integer), self.accumulation_steps), "float32")
        peak = self.peak_learning_rate
        warmup = ops.cast(max(self.warmup_steps, 1), "float32")
        warm = peak * step / warmup
        decay_span = ops.cast(max(self.decay_steps - self.warmup_steps, 1), "float32")
        progress = ops.clip((step - self.warmup_steps) / decay_span, 0.0, 1.0)
        decayed = (peak - self.end_learning_rate) * ops.power(1.0 - progress, self.power)
        decayed = decayed + self.end_learning_rate
        return ops.where(step < self.warmup_steps, warm, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "decay_steps": self.decay_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
            "accumulation_steps": self.accumulation_steps,
        }
