"""Runs the pretraining-data Beam job from a checkout: the same as `xlnet-tf prepare-pretraining`.

Example:
    python pipelines/pretraining_data.py --input 'corpus/*.txt' --vocab spiece.model \\
        --output-dir data/pretrain --num-shards 64 --direct_num_workers 2

The job's transforms live in `xlnet_tf.beam.pretraining_data` (shipped in the
wheel, so Dataflow workers get them from it); this script only calls the command.
"""

import os
import sys

if __name__ == "__main__":
    # From a checkout without `pip install`, the package is the folder next to this one.
    sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from xlnet_tf.cli.prepare_pretraining import main

    sys.exit(main())
