"""Every documented example runs: README.md and the user guide's code blocks, and the public docstrings' examples.

Python blocks and docstring `Example:` sections are executed (docstring output compared as doctest does),
with the named presets served by a local server (`example_context.py`); shell blocks' `xlnet-tf` lines are
parsed by the commands' own parsers. The files are read at test time, so a rewritten README is covered.
See `examples.py` for the rules (and the skip marker, which needs a reason).
"""

import glob
import importlib
import os

import pytest

from tests.docs import examples
from tests.docs.example_context import link_artifacts

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Markdown whose python blocks run: the README and the user guide.
RUNNABLE_DOCS = ["README.md"] + sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs",
                                                                                              "guide", "*.md")))
# Markdown whose xlnet-tf shell lines are parsed: those, the docs site and the Beam jobs' README.
SHELL_DOCS = sorted(set(RUNNABLE_DOCS) | {os.path.relpath(p, REPO) for p in glob.glob(
    os.path.join(REPO, "docs", "**", "*.md"), recursive=True)} | {"pipelines/README.md"})
PUBLIC = examples.public_objects()
PACKAGES = examples.api_pages_tool().public_packages()
# At most this many skipped examples in all (each with its reason).
MAX_SKIPS = 6


def _blocks(relative):
    return examples.markdown_blocks(os.path.join(REPO, relative))


@pytest.mark.slow
@pytest.mark.parametrize("relative", RUNNABLE_DOCS)
def test_python_blocks_of_the_readme_and_the_guide_run(relative, example_workdir, request):
    link_artifacts(request, example_workdir, relative)
    blocks = _blocks(relative)
    run, skipped = examples.run_python_blocks(blocks)
    assert run + skipped == sum(block.language in examples.PYTHON for block in blocks)


@pytest.mark.parametrize("relative", SHELL_DOCS)
def test_xlnet_tf_command_lines_parse(relative):
    examples.check_shell_blocks(_blocks(relative))


@pytest.mark.slow
@pytest.mark.parametrize("public_name, obj", PUBLIC, ids=[name for name, _ in PUBLIC])
def test_docstring_examples_run(public_name, obj, example_workdir, request):
    link_artifacts(request, example_workdir, public_name)
    found = examples.docstring_examples(obj, public_name)
    namespace = examples.example_namespace(found[0].module) if found else None
    for example in found:
        if example.skip is None:
            examples.run_docstring_example(example, namespace)


@pytest.mark.slow
@pytest.mark.parametrize("package_name", PACKAGES)
def test_package_docstring_examples_run(package_name, example_workdir):
    package = importlib.import_module(package_name)
    for example in examples.docstring_examples(package, package_name):
        if example.skip is None:
            examples.run_docstring_example(example, examples.example_namespace(package))


def test_skipped_examples_are_few_and_give_reasons():
    documented = PUBLIC + [(name, importlib.import_module(name)) for name in PACKAGES]
    skips = [(example.where, example.skip) for name, obj in documented
             for example in examples.docstring_examples(obj, name) if example.skip]
    skips += [(block.where, block.skip) for relative in RUNNABLE_DOCS for block in _blocks(relative)
              if block.skip and block.language in examples.PYTHON]
    assert len(skips) <= MAX_SKIPS, f"too many skipped examples: {skips}"
    assert all(reason for _, reason in skips)


# ---- the checks catch broken examples --------------------------------------------------------------------------

BROKEN_MARKDOWN = """# Guide

```python
x = 1
```

Text.

```python
y = x + undefined_name
```
"""


def test_a_broken_markdown_block_fails_naming_its_line(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text(BROKEN_MARKDOWN, encoding="utf-8")
    with pytest.raises(examples.ExampleError, match=r"guide\.md:9: the example raised NameError: name "
                                                    r"'undefined_name' is not defined"):
        examples.run_python_blocks(examples.markdown_blocks(str(path)))


def test_a_skipped_block_needs_a_reason_and_is_not_run(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text(BROKEN_MARKDOWN.replace("Text.", "<!-- skip-example: needs a TPU -->"), encoding="utf-8")
    assert examples.run_python_blocks(examples.markdown_blocks(str(path))) == (1, 1)
    path.write_text(BROKEN_MARKDOWN.replace("Text.", "<!-- skip-example: -->"), encoding="utf-8")
    with pytest.raises(examples.ExampleError, match=r"guide\.md:9: skip-example needs a reason"):
        examples.markdown_blocks(str(path))


def _docstring_example(section):
    return examples.DocstringExample("synthetic", section, examples)


def test_a_docstring_example_with_the_wrong_output_fails():
    def f():
        """Adds.

        Example:
        >>> 1 + 1
        3
        """

    example = examples.docstring_examples(f, "f")[0]
    with pytest.raises(examples.ExampleError, match=r"Expected:\s+3\s+Got:\s+2"):
        examples.run_docstring_example(example, {})
    ok = _docstring_example(">>> 1 + 1\n2\n")
    examples.run_docstring_example(ok, {})


def test_a_docstring_example_that_raises_fails_and_a_fenced_one_too():
    with pytest.raises(examples.ExampleError, match="ZeroDivisionError"):
        examples.run_docstring_example(_docstring_example(">>> 1 / 0\n"), {})
    with pytest.raises(examples.ExampleError, match="the example raised ZeroDivisionError"):
        examples.run_docstring_example(_docstring_example("```python\n1 / 0\n```\n"), {})


def test_doctest_skip_is_refused_and_a_skip_comment_needs_a_reason():
    with pytest.raises(examples.ExampleError, match=r"\+SKIP` carries no reason"):
        examples.run_docstring_example(_docstring_example(">>> 1 / 0  # doctest: +SKIP\n"), {})
    assert _docstring_example(">>> # skip-example: needs a TPU\n>>> 1 / 0\n").skip == "needs a TPU"
    with pytest.raises(examples.ExampleError, match="skip-example needs a reason"):
        assert _docstring_example(">>> # skip-example:\n>>> 1 / 0\n").skip is None


def test_the_example_section_ends_at_the_next_section():
    def f():
        """Does.

        Example:
        >>> 1
        1

        Returns:
            >>> never run
        """

    assert examples.example_section(f.__doc__).strip() == ">>> 1\n1"


@pytest.mark.parametrize("line, message", [
    ("xlnet-tf pretrian --config tiny", "unknown xlnet-tf command 'pretrian'"),
    ("xlnet-tf pretrain --config tiny --work-dir runs/x", "unrecognized arguments: --work-dir runs/x"),
    ("xlnet-tf prepare-pretraining --input a.txt --vocab s.model --output-dir d --temp-location gs://b/t",
     "neither the job's nor Beam's\\): --temp-location gs://b/t"),
    ("xlnet-tf presets --download", "expected one argument"),
])
def test_a_broken_command_line_fails(tmp_path, line, message):
    path = tmp_path / "guide.md"
    path.write_text(f"Run:\n\n```bash\n# a comment\n{line}\n```\n", encoding="utf-8")
    with pytest.raises(examples.ExampleError, match=r"guide\.md:3: `.*` does not parse: .*" + message
                       if "unknown" not in message else message):
        examples.check_shell_blocks(examples.markdown_blocks(str(path)))


def test_good_command_lines_parse_with_continuations_and_beam_flags(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text("```bash\npip install . && xlnet-tf pretrain --config tiny --workdir runs/x \\\n"
                    "  --set training.train_steps=2\n"
                    "xlnet-tf prepare-pretraining --input 'c/*.txt' --vocab s.model --output-dir d \\\n"
                    "  --runner DataflowRunner --temp_location gs://b/t --direct_num_workers 2\n```\n",
                    encoding="utf-8")
    assert examples.check_shell_blocks(examples.markdown_blocks(str(path))) == 2
