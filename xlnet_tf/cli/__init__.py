"""Every command-line entry point: `xlnet-tf <command>` dispatches to one module here per command."""

from xlnet_tf.cli.main import main

__all__ = ["main"]
