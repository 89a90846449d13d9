"""What the dead-code scan reports that is not dead, each with the reason it stays.

The scan is `vulture xlnet_tf pipelines tools --min-confidence 80`, run by
`tests/dead_code_test.py`; it reads this file as part of `tools/`. A bare name
here counts as a use of every definition of that name. Never imported.
"""
# The names are bare expressions read only by the scan, none is defined here:
# ruff: noqa: F821, B018

# Keras calls `build(input_shape)` and `compute_output_shape(input_shape)` with the inputs' shapes;
# layers whose weights or outputs do not depend on them still take the argument (XLNetBackbone,
# XLNetPretrainer, XLNetTask, XLNetPacker, the preprocessors).
input_shape

# Beam's `DoFn.process` receives the element; the pretraining job's manifest step runs on one
# placeholder element and reads only its side inputs (xlnet_tf/beam/pretraining_data.py).
unused_element

# The context-manager protocol passes the exception to `__exit__`; `RunLock` releases the lock
# whatever it was (xlnet_tf/storage/run_lock.py).
exc_info
