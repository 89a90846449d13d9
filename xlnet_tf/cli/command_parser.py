"""`CommandParser`: the argument parser of every `xlnet-tf` command, one flag style.

Flags are spelled with dashes (`--output-dir`). Flags that were spelled with
underscores before (`--output_dir`) keep that spelling for one release as a
hidden alias: `add_renamed_argument` registers the dash flag, and the old
spelling is rewritten to it before parsing, so help, usage and error messages
show only the dash spelling while old command lines still parse to the same
values. Options the parser does not know (Beam's `--temp_location`, ...) are
left untouched, whatever their spelling.
"""

import argparse
import sys


class CommandParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` that also accepts the old underscore spelling of renamed flags.

    Example:
    >>> parser = CommandParser(prog="xlnet-tf demo")
    >>> _ = parser.add_renamed_argument("--output-dir", required=True)
    >>> parser.parse_args(["--output_dir", "out"]).output_dir
    'out'
    >>> parser.old_spellings
    {'--output_dir': '--output-dir'}
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.old_spellings = {}

    def add_renamed_argument(self, flag, **kwargs):
        """Adds `flag` (dashes) and accepts its underscore spelling as a hidden alias.

        Args:
            flag: the dash spelling, e.g. `--num-shards`.
            **kwargs: as for `add_argument`; `dest` defaults to the underscore name.

        Returns:
            The `argparse.Action`.
        """
        if not flag.startswith("--") or "-" not in flag[2:]:
            raise ValueError(f"add_renamed_argument takes a dashed long flag such as --output-dir, got {flag!r}.")
        old = "--" + flag[2:].replace("-", "_")
        self.old_spellings[old] = flag
        return self.add_argument(flag, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        args = self._new_spellings(list(sys.argv[1:] if args is None else args))
        return super().parse_known_args(args, namespace)

    def _new_spellings(self, args):
        """`args` with every old flag spelling replaced by the new one (`--a_b=x` too), up to `--`."""
        rewritten = []
        for index, arg in enumerate(args):
            if arg == "--":
                return rewritten + args[index:]
            name, equals, value = arg.partition("=")
            if name in self.old_spellings:
                arg = self.old_spellings[name] + equals + value
            rewritten.append(arg)
        return rewritten
