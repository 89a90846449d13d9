"""`CommandParser`: the argument parser of every `xlnet-tf` command, one flag style and help layout.

Flags are spelled with dashes (`--output-dir`). An underscore spelling of one
of the parser's own flags (`--output_dir`) is refused with a message naming the
dash spelling, rather than passed on: commands that hand unknown options to
Beam would otherwise let Beam drop it with only a warning. Options the parser
does not know (Beam's `--temp_location`, ...) are left untouched, whatever
their spelling.

Every option's `--help` line ends with its default (`DefaultsHelpFormatter`),
unless the default is "not set" (None, False, an empty list) or the help text
already says what it is.
"""

import argparse
import sys


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends `(default: VALUE)` to an option's help when it has a default worth showing."""

    def _get_help_string(self, action):
        help_text = action.help or ""
        if not _shows_default(action) or "default" in help_text.lower():
            return help_text
        return f"{help_text} (default: %(default)s)".lstrip()

    def _format_action(self, action):
        # argparse leaves the help column of an option without help text empty; the default goes there.
        if action.help is None and _shows_default(action):
            action.help = "(default: %(default)s)"
        return super()._format_action(action)


def _shows_default(action):
    """Whether an option's default says something: not None, False, an empty list or suppressed."""
    default = action.default
    unset = default is None or default is False or default == [] or default is argparse.SUPPRESS
    return bool(action.option_strings) and not unset


class CommandParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` that refuses underscore spellings of its dash flags.

    Example:
    >>> parser = CommandParser(prog="xlnet-tf demo")
    >>> _ = parser.add_argument("--output-dir", required=True)
    >>> parser.parse_args(["--output-dir", "out"]).output_dir
    'out'

    `parser.parse_args(["--output_dir", "out"])` exits with status 2 and
    `xlnet-tf demo: error: unrecognized argument --output_dir: flags are spelled
    with dashes; use --output-dir.`
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        self._refuse_underscore_spellings(args)
        return super().parse_known_args(args, namespace)

    def _refuse_underscore_spellings(self, args):
        """Exits with a usage error when `args` spells one of this parser's flags with underscores (up to `--`)."""
        flags = {option for action in self._actions for option in action.option_strings}
        for arg in args:
            if arg == "--":
                return
            name = arg.partition("=")[0]
            dashed = "--" + name[2:].replace("_", "-")
            if name.startswith("--") and "_" in name and dashed in flags:
                self.error(f"unrecognized argument {name}: flags are spelled with dashes; use {dashed}.")
