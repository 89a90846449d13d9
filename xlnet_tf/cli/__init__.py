"""Every command-line entry point: `xlnet-tf <command>` (`xlnet_tf.cli.main:main`) dispatches to one module here
per command."""
