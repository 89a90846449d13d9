"""`xlnet-tf configs`: list the shipped run configs (the names `--config` takes) with one-line descriptions.

Example:
    xlnet-tf configs            # pretrain and finetune configs
    xlnet-tf configs finetune   # only the fine-tuning ones
"""

import os
import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.training.shipped_configs import CONFIG_KINDS, config_description, config_names, shipped_config_dir

# Longer first comment lines are cut, so each config stays on one terminal line.
_DESCRIPTION_LIMIT = 100


def _parser():
    parser = CommandParser(prog="xlnet-tf configs", description=(
        "List the run configs shipped with the package; pass a name to `--config`."))
    parser.add_argument("kind", nargs="?", choices=CONFIG_KINDS, help="list only these configs")
    return parser


def main(argv=None):
    """Entry point of `xlnet-tf configs`; returns the exit code."""
    args = _parser().parse_args(argv)
    root = shipped_config_dir()
    if root is None:
        print("xlnet-tf configs: no shipped configs were found in this installation.", file=sys.stderr)
        return 1
    for kind in [args.kind] if args.kind else CONFIG_KINDS:
        names = config_names(kind)
        print(f"{kind} configs (xlnet-tf {kind} --config NAME):")
        width = max(len(n) for n in names) + 2
        for name in names:
            description = config_description(os.path.join(root, kind, name + ".yaml"))
            if len(description) > _DESCRIPTION_LIMIT:
                description = description[:_DESCRIPTION_LIMIT - 3].rstrip() + "..."
            print(f"  {name:<{width}}{description}".rstrip())
        print()
    print(f"Files: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
