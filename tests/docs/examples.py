"""Finding and running the documented examples: markdown code blocks and docstring `Example:` sections.

- Markdown: every fenced block whose info string is `python`/`py` runs; every `bash`/`sh`/`shell`/`console`
  block is scanned for `xlnet-tf` command lines, each parsed by its subcommand's parser without running.
  The blocks of one file run in order in one namespace, as a reader would paste them.
- Docstrings: the `Example:` section of each public package (`xlnet_tf` and its subpackages with an
  `__all__`), of each public class and function (their `__all__`) and of each public method a class defines.
  Doctest lines (`>>>`) run under `doctest` (their shown output is compared); fenced python blocks run as code.
  A class's methods continue its namespace.
- Skipping: `<!-- skip-example: REASON -->` on the line before a markdown block, or `>>> # skip-example:
  REASON` (or `# skip-example: REASON` first in a fenced block) at the top of a docstring section. A skip
  without a reason is an error, and so is doctest's `+SKIP`, which carries none.
"""

import argparse
import dataclasses
import doctest
import importlib
import inspect
import os
import re
import shlex
import textwrap

SKIP_MARKER = re.compile(r"<!--\s*skip-example:(.*?)-->")
SKIP_COMMENT = re.compile(r"^\s*(?:>>>\s*)?#\s*skip-example:(.*)$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)[^\n]*$")
SECTION_HEADER = re.compile(r"^(\s*)Examples?:\s*$")
OTHER_HEADER = re.compile(r"^(\s*)(Args|Arguments|Call arguments|Returns|Yields|Raises|Attributes|Note|Notes"
                          r"|References|See also|Warning|Warnings|Todo):\s*$")
PYTHON = {"python", "py", "python3", "pycon"}
SHELL = {"bash", "sh", "shell", "console", "zsh"}
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.FAIL_FAST


class ExampleError(AssertionError):
    """An example that failed, named by where it is written."""


@dataclasses.dataclass
class Block:
    """One code block: where it is (`file:line` or `object`), its language, code and skip reason."""

    where: str
    language: str
    code: str
    skip: str = None


def markdown_blocks(path, text=None):
    """The fenced code blocks of a markdown file, in order.

    Raises:
        ExampleError: an unclosed fence, or a skip marker without a reason.
    """
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    lines = text.splitlines()
    blocks, index = [], 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        indent, fence, language = match.group(1), match.group(2), match.group(3).lower()
        start = index
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        index += 1
        body = []
        while index < len(lines) and not lines[index].strip().startswith(fence[:3]):
            body.append(lines[index])
            index += 1
        if index == len(lines):
            raise ExampleError(f"{path}:{start + 1}: the code block opened here is never closed")
        index += 1
        skip = SKIP_MARKER.search(previous)
        reason = skip.group(1).strip() if skip else None
        if skip and not reason:
            raise ExampleError(f"{path}:{start + 1}: skip-example needs a reason: <!-- skip-example: REASON -->")
        code = textwrap.dedent("\n".join(line.removeprefix(indent) for line in body))
        blocks.append(Block(f"{path}:{start + 1}", language, code, reason))
    return blocks


def run_python_blocks(blocks, namespace=None):
    """Runs the python blocks in order in one namespace; returns `(run, skipped)` counts.

    Raises:
        ExampleError: naming the block (`file:line`) and the exception it raised.
    """
    namespace = {"__name__": "__example__"} if namespace is None else namespace
    run = skipped = 0
    for block in blocks:
        if block.language not in PYTHON:
            continue
        if block.skip:
            skipped += 1
            continue
        try:
            exec(compile(block.code, block.where, "exec"), namespace)  # noqa: S102 - running the examples is the point
        except Exception as e:
            raise ExampleError(f"{block.where}: the example raised {type(e).__name__}: {e}") from e
        run += 1
    return run, skipped


# ---- shell blocks: xlnet-tf command lines -------------------------------------------------------------------


def shell_commands(code):
    """`xlnet-tf ...` command lines of a shell block (continuations joined, comments and prompts dropped)."""
    joined = re.sub(r"\\\n\s*", " ", code)
    commands = []
    for line in joined.splitlines():
        line = line.strip()
        line = line.removeprefix("$ ")
        for part in re.split(r"\s*(?:&&|\|\||;)\s*", line):
            if part.startswith(("xlnet-tf ", "python -m xlnet_tf.cli ")) or part == "xlnet-tf":
                commands.append(part)
    return commands


def _beam_parser():
    """An argparse parser of every Beam pipeline option, built as `PipelineOptions.get_all_options` builds it."""
    from apache_beam.options import pipeline_options

    parser = pipeline_options._BeamArgumentParser(allow_abbrev=False)
    classes = {}
    for cls in pipeline_options.PipelineOptions.__subclasses__():
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)
    return parser


BEAM_COMMANDS = {"prepare-pretraining", "prepare-finetuning"}


def check_command(command, where):
    """Parses one `xlnet-tf` command line with its subcommand's parser, without running it.

    Raises:
        ExampleError: an unknown subcommand, or a flag its parser (or, for the Beam jobs, Beam) refuses.
    """
    from xlnet_tf.cli.main import COMMANDS

    words = shlex.split(command, comments=True)
    words = words[3:] if words[:3] == ["python", "-m", "xlnet_tf.cli"] else words[1:]
    if not words or words[0] in ("-h", "--help", "--version"):
        return
    name, argv = words[0], words[1:]
    if name not in COMMANDS:
        raise ExampleError(f"{where}: unknown xlnet-tf command {name!r} in: {command}")
    module_name = COMMANDS[name][0].split(":")[0]
    parser = importlib.import_module(module_name)._parser()
    parser.exit_on_error = False
    parser.error = _raise_parse_error  # argparse calls error() for unknown flags and bad values
    try:
        if name in BEAM_COMMANDS:
            _, beam_args = parser.parse_known_args(argv)
            beam_parser = _beam_parser()
            beam_parser.error = _raise_parse_error
            _, unknown = beam_parser.parse_known_args(beam_args)
            if unknown:
                raise ValueError(f"unrecognized arguments (neither the job's nor Beam's): {' '.join(unknown)}")
        else:
            parser.parse_args(argv)
    except (argparse.ArgumentError, ValueError, SystemExit) as e:
        raise ExampleError(f"{where}: `{command}` does not parse: {e}") from None


def _raise_parse_error(message):
    raise ValueError(message)


def check_shell_blocks(blocks):
    """Checks every `xlnet-tf` line of the shell blocks; returns how many commands were checked."""
    checked = 0
    for block in blocks:
        if block.language in SHELL and not block.skip:
            for command in shell_commands(block.code):
                check_command(command, block.where)
                checked += 1
    return checked


# ---- docstrings -----------------------------------------------------------------------------------------------


def api_pages_tool():
    """`tools/write_api_pages.py` as a module: it defines which packages are public (`public_packages`)."""
    import importlib.util

    path = os.path.join(REPO, "tools", "write_api_pages.py")
    spec = importlib.util.spec_from_file_location("write_api_pages", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def public_names():
    """`[(package, name, object)]`: every class and function of `xlnet_tf.__all__` and subpackages' `__all__`."""
    found = []
    for package_name in api_pages_tool().public_packages():
        package = importlib.import_module(package_name)
        for name in package.__all__:
            obj = getattr(package, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                found.append((package_name, name, obj))
    return found


def public_objects():
    """`[(qualified public name, object)]`: `public_names` with each object once, under its first package."""
    found, seen = [], set()
    for package_name, name, obj in public_names():
        if id(obj) not in seen:
            seen.add(id(obj))
            found.append((f"{package_name}.{name}", obj))
    return found


def documented_members(obj):
    """`[(name, function)]`: the object itself, then the public methods a class defines (source order)."""
    members = [("", obj)]
    if inspect.isclass(obj):
        for name, value in vars(obj).items():
            if name.startswith("_"):
                continue
            function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
            function = function.fget if isinstance(function, property) else function
            if inspect.isfunction(function):
                members.append(("." + name, function))
    return members


def example_section(docstring):
    """The text of a docstring's `Example:` (or `Examples:`) section, or None."""
    lines = inspect.cleandoc(docstring or "").splitlines()
    for index, line in enumerate(lines):
        header = SECTION_HEADER.match(line)
        if header:
            indent = len(header.group(1))
            body = []
            for follow in lines[index + 1:]:
                other = OTHER_HEADER.match(follow)
                if other and len(other.group(1)) <= indent:
                    break
                body.append(follow)
            return textwrap.dedent("\n".join(body))
    return None


@dataclasses.dataclass
class DocstringExample:
    """The `Example:` section of one public object or method."""

    where: str
    section: str
    module: object

    @property
    def fenced(self):
        return "```" in self.section

    @property
    def skip(self):
        first = next((line for line in self.section.splitlines() if line.strip()), "")
        match = SKIP_COMMENT.match(first)
        if match and not match.group(1).strip():
            raise ExampleError(f"{self.where}: skip-example needs a reason: `>>> # skip-example: REASON`")
        return match.group(1).strip() if match else None


def docstring_examples(obj, public_name):
    """The `Example:` sections of a public object and of its methods, in that order."""
    module = inspect.getmodule(obj)
    examples = []
    for suffix, member in documented_members(obj):
        section = example_section(inspect.getdoc(member) if suffix else obj.__doc__)
        if section and section.strip():
            examples.append(DocstringExample(public_name + suffix, section, module))
    return examples


def example_namespace(module):
    """What a docstring example sees: its module's names (as doctest gives), the public API, np, tf, keras, os."""
    import keras
    import numpy as np
    import tensorflow as tf

    import xlnet_tf

    namespace = dict(vars(module))
    for name in xlnet_tf.__all__:
        namespace.setdefault(name, getattr(xlnet_tf, name))
    if hasattr(module, "__path__"):  # a package's own docstring: its public names
        package = module
    else:
        package = importlib.import_module(module.__name__.rsplit(".", 1)[0]) if "." in module.__name__ else xlnet_tf
    for name in getattr(package, "__all__", ()):
        namespace.setdefault(name, getattr(package, name))
    namespace.update({"np": np, "tf": tf, "keras": keras, "os": os, "__name__": "__example__"})
    return namespace


def run_docstring_example(example, namespace):
    """Runs one section in `namespace`; doctest output must match what the docstring shows.

    Raises:
        ExampleError: naming the object, the failing line and what it printed or raised.
    """
    if "+SKIP" in example.section:
        raise ExampleError(f"{example.where}: `# doctest: +SKIP` carries no reason; make the example run, or "
                           "start the section with `>>> # skip-example: REASON`")
    if example.fenced:
        blocks = markdown_blocks(example.where, example.section)
        python = [block for block in blocks if block.language in PYTHON]
        if not python:
            raise ExampleError(f"{example.where}: the Example section has no python block")
        run_python_blocks(python, namespace)
        return
    parser = doctest.DocTestParser()
    test = parser.get_doctest(example.section, namespace, example.where, example.where, 0)
    if not test.examples:
        raise ExampleError(f"{example.where}: the Example section has no `>>>` lines")
    report = []
    runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS, verbose=False)
    runner.run(test, out=report.append, clear_globs=False)
    namespace.update(test.globs)  # DocTest ran on a copy; the class's next method example continues it
    if runner.failures:
        raise ExampleError("".join(report))
