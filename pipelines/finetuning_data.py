"""Runs the fine-tuning-data Beam job from a checkout: the same as `xlnet-tf prepare-finetuning`.

Example:
    python pipelines/finetuning_data.py --task-type classification --tfds glue/mrpc \\
        --tfds-splits train,validation --vocab spiece.model --output-dir data/mrpc

The job's transforms live in `xlnet_tf.beam.finetuning_data` (shipped in the
wheel, so Dataflow workers get them from it); this script only calls the command.
"""

import os
import sys

if __name__ == "__main__":
    # From a checkout without `pip install`, the package is the folder next to this one.
    sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from xlnet_tf.cli.prepare_finetuning import main

    sys.exit(main())
