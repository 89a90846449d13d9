"""Two virtual CPU devices for the distribution tests, set before TensorFlow creates its devices."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import tensorflow as tf  # noqa: E402

try:
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
except RuntimeError:
    pass  # Already initialised by an earlier test module; tests needing 2 devices skip, saying why.
