"""The project's documents, docstrings and comments speak of the project, never of how its work was organized.

`find_work_references(text)` names every reference to an internal work item (a numbered issue or item, a bare
`#N`) or to a working sitting (an ordinal or numbered session, sitting or round; the parametrized cases below
show each form). A repository's own issue reference (`apache/beam#19726`, `transformers#774`) is a citation,
not a work item; TensorFlow's `tf.compat.v1.Session` and pytest's `session` scope are technical terms, and
the patterns leave them alone. The scan reads every Markdown file, notebook and benchmark results file of the
repository and the docstrings and comments of its Python files.
"""

import ast
import io
import json
import os
import re
import tokenize

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("xlnet_tf", "pipelines", "tools", "benchmarks", "tests", "configs", "notebooks", "docs", ".ci")

_NUMBER = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
_ORDINAL = (r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|previous|next|this"
            r"|\d+(?:st|nd|rd|th))")
WORK_REFERENCE = re.compile(
    "|".join((
        r"\bissues? ?#?\d+",
        r"\bissue-\d+",
        r"(?<![\w./-])#\d+\b",                     # a bare #16; owner/name#16 and name#16 are citations
        rf"\b(?:work )?items? {_NUMBER}\b",
        r"\bwork items?\b",
        rf"\b{_ORDINAL}[ -]sessions?\b",
        rf"\b(?:{_ORDINAL}|one|that|same|each|a|the)[ -]sittings?\b",  # "a cat was sitting" is not one
        rf"\bsessions? {_NUMBER}\b",
        r"\bsittings\b",
        rf"\b{_ORDINAL}[ -]rounds? of work\b",
        r"\bround (?:one|two|three|four|five)\b",
        r"\bthis issue\b|\bthe issue's\b",
    )),
    re.IGNORECASE,
)


# Every reference holds one of these words; a text without any needs no closer look (keeps the scan fast).
_CANDIDATE = re.compile(r"issue|#\d|item|session|sitting|round", re.IGNORECASE)


def find_work_references(text):
    """Returns the phrases of `text` that refer to an internal work item or a working sitting."""
    lines = "\n".join(line for line in text.splitlines() if _CANDIDATE.search(line))
    return [match.group(0) for match in WORK_REFERENCE.finditer(lines)]


def _python_prose(source):
    """Yields (line, text) for every comment and docstring of a Python source."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                yield node.body[0].lineno, docstring


def _notebook_prose(source):
    for index, cell in enumerate(json.loads(source)["cells"]):
        text = "".join(cell["source"])
        if cell["cell_type"] == "code":
            # IPython's `!command` and `%magic` lines are not Python; they carry no prose either.
            code = "\n".join("" if line.lstrip().startswith(("!", "%")) else line for line in text.splitlines())
            yield from ((f"cell {index}", t) for _, t in _python_prose(code))
        else:
            yield f"cell {index}", text


def _repository_prose():
    paths = [os.path.join(REPO, name) for name in os.listdir(REPO) if name.endswith(".md")]
    for folder in FOLDERS:
        for root, _, files in os.walk(os.path.join(REPO, folder)):
            paths += [os.path.join(root, f) for f in files if f.endswith((".md", ".py", ".ipynb", "_results.txt"))]
    for path in sorted(paths):
        with open(path, encoding="utf-8") as f:
            source = f.read()
        relative = os.path.relpath(path, REPO)
        if relative == os.path.relpath(__file__, REPO):
            continue  # this file spells out the patterns it looks for
        if not find_work_references(source):
            continue  # no reference anywhere in the file, so none in its comments and docstrings
        if path.endswith(".py"):
            yield from ((f"{relative}:{line}", text) for line, text in _python_prose(source))
        elif path.endswith(".ipynb"):
            yield from ((f"{relative} {where}", text) for where, text in _notebook_prose(source))
        else:
            yield from ((f"{relative}:{n}", line) for n, line in enumerate(source.splitlines(), 1))


@pytest.mark.parametrize("text, expected", [
    ("the ratios of issue 16 are met", ["issue 16"]),
    ("see #16 for the targets", ["#16"]),
    ("as item 3 asked", ["item 3"]),
    ("measured in the fifth session", ["fifth session"]),
    ("measured in session 4, then in this sitting", ["session 4", "this sitting"]),
    ("done in round two", ["round two"]),
    ("the fifth-session figures", ["fifth-session"]),
])
def test_work_references_are_found(text, expected):
    assert find_work_references(text) == expected


@pytest.mark.parametrize("text", [
    "tf.compat.v1.Session() runs the TF1 graph",
    '@pytest.fixture(scope="session")',
    "the session fixture `two_cpu_devices`, run once per session",
    "Beam's known bug apache/beam#19726 and transformers#774",
    "5 rounds per start order, one round each",
    "a color #1f77b4 and `# [B, L]` shape comments",
    "A cat was sitting. A step right after sitting idle runs slower.",
])
def test_technical_terms_and_citations_are_not_work_references(text):
    assert find_work_references(text) == []


def test_no_document_docstring_or_comment_refers_to_work_items_or_sittings():
    hits = [f"{where}: {phrase}" for where, text in _repository_prose() for phrase in find_work_references(text)]
    assert not hits, "\n".join(hits)


def test_readme_is_short_and_keeps_the_quick_start_commands():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert len(readme.splitlines()) <= 220
    quick_start = readme.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert quick_start.splitlines() == ['pip install ".[beam]" && xlnet-tf quickstart',
                                        'pip install ".[test]" && python -m pytest -n 2']
