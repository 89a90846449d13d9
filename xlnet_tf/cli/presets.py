"""`xlnet-tf presets`: list the named presets, or download (and convert) one."""

import argparse
import sys

from xlnet_tf.cli.command_parser import CommandParser
from xlnet_tf.presets import preset_cache
from xlnet_tf.presets.download_limits import DEADLINE_ENV, DEFAULT_TIMEOUT, TIMEOUT_ENV, seconds_value
from xlnet_tf.presets.preset_error import PresetError
from xlnet_tf.presets import preset_registry
from xlnet_tf.presets.preset_registry import HF_BASE_URL_ENV, RELEASE_BASE_URL_ENV
from xlnet_tf.presets.preset_install import download_preset


def _parser():
    parser = CommandParser(
        prog="xlnet-tf presets",
        description="List the named presets (name, source, approximate download size, cached, not cached or "
                    "damaged: cached files are checked against the sha256s of their manifest, and each damaged "
                    "entry gets one line after the table saying what is wrong and the fix; the listing exits 0 "
                    "either way), or download, check, convert and cache one with --download. Cache: "
                    f"${preset_cache.HOME_ENV}/presets (default ~/.cache/xlnet_tf/presets). Sources: "
                    f"${RELEASE_BASE_URL_ENV} and ${HF_BASE_URL_ENV} (or $HF_ENDPOINT) replace the "
                    "base URLs (mirrors).")
    parser.add_argument("--download", metavar="NAME", action="append", default=[],
                        help="download, check, convert and cache this preset (repeatable); prints its directory.")
    parser.add_argument("--force", action="store_true",
                        help="with --download: download and convert again even when cached (the fix for a "
                             "damaged entry).")
    parser.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                        help=f"with --download: how long one read may wait for data (default ${TIMEOUT_ENV}, "
                             f"else {DEFAULT_TIMEOUT:g}); raise it behind a slow proxy.")
    parser.add_argument("--deadline", type=_seconds, metavar="SECONDS",
                        help=f"with --download: how long the download of each preset may take in all, however "
                             f"slowly data keeps arriving (default ${DEADLINE_ENV}, else no deadline).")
    return parser


def _seconds(value):
    try:
        return seconds_value(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def format_table():
    """The listing printed by `xlnet-tf presets`.

    A header, one row per preset (CACHED is `yes`, `no` or `damaged`), the cache
    folder, then one line per damaged entry naming what is wrong and the fix.
    """
    rows = [("NAME", "SOURCE", "SIZE", "CACHED", "DESCRIPTION")]
    damaged = []
    for spec in preset_registry.PRESETS.values():
        cached = "no"
        if preset_cache.is_cached(spec.name):
            entry = preset_cache.preset_cache_dir(spec.name)
            problem = preset_cache.entry_problem(entry)
            cached = "damaged" if problem else "yes"
            if problem:
                damaged.append(preset_cache.damaged_entry_message(spec.name, entry, problem))
        rows.append((spec.name, spec.source_label, spec.approximate_size, cached, spec.description))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths)) + "  " + row[4]
             for row in rows]
    lines.append(f"cache: {preset_cache.presets_dir()} (sizes are approximate downloads)")
    return "\n".join(lines + damaged)


class _Progress:
    """Prints a line per 10% of each file to stderr."""

    def __init__(self):
        self._shown = {}

    def __call__(self, file_name, received, total):
        if not total:
            return
        step = int(10 * received / total)
        if step > self._shown.get(file_name, -1):
            self._shown[file_name] = step
            print(f"  {file_name}: {received / 1e6:.1f} / {total / 1e6:.1f} MB", file=sys.stderr)


def main(argv=None):
    """Entry point of `xlnet-tf presets`; returns the exit code."""
    args = _parser().parse_args(argv)
    for option in ("force", "timeout", "deadline"):
        if getattr(args, option) not in (None, False) and not args.download:
            print(f"xlnet-tf presets: --{option} applies to --download only.", file=sys.stderr)
            return 2
    try:
        preset_cache.check_cache_location()
    except PresetError as e:
        print(f"xlnet-tf presets: {e}", file=sys.stderr)
        return 2
    if not args.download:
        print(format_table())
        return 0
    for name in args.download:
        try:
            directory = download_preset(name, force=args.force, progress=_Progress(), timeout=args.timeout,
                                        deadline=args.deadline)
        except PresetError as e:
            print(f"xlnet-tf presets: {e}", file=sys.stderr)
            return 1
        print(f"{name}: {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
