"""`python -m xlnet_tf.cli ...`: the same as the `xlnet-tf` command."""

import sys

from xlnet_tf.cli.main import main

sys.exit(main())
