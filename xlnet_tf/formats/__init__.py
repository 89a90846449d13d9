"""On-disk and wire formats: special ids, record layouts, preset and serving file names.

Imports nothing heavy (no TensorFlow, Keras, Beam or numpy at import time), so light
readers and the Beam jobs' launchers can use it. The specification is `README.md`.
"""
