"""Command-line options shared by `xlnet-tf pretrain` and `xlnet-tf finetune`.

Each option is a shorthand for a `--set section.key=value` override, so the
resolved config in the work directory records it like any other setting. No
TensorFlow import here: `--help` stays fast.
"""

STRATEGY_CHOICES = ("auto", "tpu", "mirrored", "multi_worker", "one_device")


def add_run_arguments(parser, config_help):
    """Adds --config, --workdir, --set, --strategy and --virtual-cpu-devices to `parser`."""
    parser.add_argument("--config", action="append", default=[], metavar="FILE",
                        help=f"{config_help} (repeatable; later files override earlier ones)")
    parser.add_argument("--workdir", required=True, help="work directory (created; reused to resume)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        dest="overrides", help="override one config value (YAML syntax)")
    parser.add_argument("--strategy", choices=STRATEGY_CHOICES,
                        help="same as --set distribution.strategy=...")
    parser.add_argument("--virtual-cpu-devices", type=int, metavar="N",
                        help="split the CPU into N logical devices (try distribution on a laptop)")


def run_overrides(args):
    """The `--set` overrides followed by those the shorthand options stand for."""
    overrides = list(args.overrides)
    if args.strategy:
        overrides.append(f"distribution.strategy={args.strategy}")
    if args.virtual_cpu_devices is not None:
        overrides.append(f"distribution.virtual_cpu_devices={args.virtual_cpu_devices}")
    return overrides
