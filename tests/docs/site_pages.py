"""Reading the built documentation site as a reader meets it: the API pages' HTML.

`build_site(directory)` runs `mkdocs build --strict`; the other functions read what it wrote:
the article of each API page, its examples as a reader would copy them, the argument tables,
the links between pages and the navigation. `site_test.py` holds the checks.

Example:
    >>> from tests.docs.site_pages import example_code
    >>> print(example_code(">>> x = 1\\n>>> print(x +\\n...       1)\\n2"))
    x = 1
    print(x +
          1)
"""

import html
import os
import re
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
_ARTICLE = re.compile(r"<article[^>]*>(.*)</article>", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_CODE_BLOCK = re.compile(r'<div class="(?:language-(\w+) )?highlight"><pre>(?:<span></span>)?<code>(.*?)</code></pre>',
                         re.DOTALL)
_BLOCKQUOTE = re.compile(r"<blockquote>(.*?)</blockquote>", re.DOTALL)
_TABLE = re.compile(r"<table>(.*?)</table>", re.DOTALL)
_ROW = re.compile(r'<tr class="doc-section-item">(.*?)</tr>', re.DOTALL)
_CELL = re.compile(r"<td>(.*?)</td>", re.DOTALL)
_HREF = re.compile(r'<a [^>]*href="([^"#]*)(#[^"]*)?"')


def build_site(site_dir):
    """Builds the site strictly into `site_dir`; returns mkdocs' output. Raises `AssertionError` on failure."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{output[-4000:]}"
    return output


def api_pages(site_dir):
    """`{page path relative to api/ (e.g. "xlnet_tf/XLNetClassifier"): article HTML}` of the object pages."""
    pages = {}
    root = os.path.join(site_dir, "api")
    for folder, _, files in os.walk(root):
        if "index.html" not in files or os.path.samefile(folder, root):
            continue
        relative = os.path.relpath(folder, root).replace(os.sep, "/")
        if "/" not in relative:
            continue  # a package's index page: a table of links, no object
        with open(os.path.join(folder, "index.html"), encoding="utf-8") as f:
            match = _ARTICLE.search(f.read())
        pages[relative] = match.group(1) if match else ""
    return pages


def text(fragment):
    """The visible text of an HTML fragment."""
    return html.unescape(_TAG.sub("", fragment))


def code_blocks(article):
    """`[(language, text)]` of the highlighted code blocks of a page."""
    return [(language or "", text(code)) for language, code in _CODE_BLOCK.findall(article)]


def example_code(block):
    """The Python a reader runs from a doctest block: the `>>>` and `...` lines, prompts removed."""
    lines = []
    for line in block.splitlines():
        if line.startswith((">>> ", "... ")):
            lines.append(line[4:])
        elif line.rstrip() in (">>>", "..."):
            lines.append("")
    return "\n".join(lines)


def page_examples(article):
    """The examples of a page as code to run: doctest blocks without prompts, and python blocks."""
    examples = []
    for language, block in code_blocks(article):
        if ">>> " in block or block.startswith(">>>"):
            examples.append(example_code(block))
        elif language in ("python", "py"):
            examples.append(block)
    return [code for code in examples if code.strip()]


def prompts_in_blockquotes(article):
    """The blockquotes of a page that hold a doctest prompt (an example rendered as quoted text)."""
    return [text(quote)[:80] for quote in _BLOCKQUOTE.findall(article) if "&gt;&gt;&gt;" in quote or ">>>" in quote]


def argument_rows(article):
    """`[(name, type)]` of the argument tables (Name / Type / Description / Default); type "" when none."""
    rows = []
    for table in _TABLE.findall(article):
        header = text(table.split("</thead>")[0])
        if "Name" not in header or "Type" not in header or "Default" not in header:
            continue
        for row in _ROW.findall(table):
            cells = [text(cell).strip() for cell in _CELL.findall(row)]
            if len(cells) >= 2:
                rows.append((cells[0], cells[1]))
    return rows


def links_to_other_pages(article, page):
    """The distinct API pages (relative to api/) that `page`'s article links to, itself excluded."""
    targets = set()
    for href, _ in _HREF.findall(article):
        if not href or "://" in href:
            continue
        target = os.path.normpath(os.path.join("api", page, href)).replace(os.sep, "/")
        if target.startswith("api/") and target != f"api/{page}":
            targets.add(target[len("api/"):].rstrip("/"))
    return targets


def has_signature(article, name):
    """Whether the page shows `name(...)`, the signature of the object it documents."""
    signatures = re.findall(r'<div class="doc-signature highlight">(.*?)</div>', article, re.DOTALL)
    return any(re.match(rf"\s*{re.escape(name)}\s*\(", text(signature)) for signature in signatures)


def documents_member(article, owner_path, member):
    """Whether the page documents `member` of the object at `owner_path` (its heading anchor is there)."""
    return f'id="{owner_path}.{member}"' in article


def navigation_targets(site_dir):
    """The hrefs of the site's navigation, as written on the home page."""
    with open(os.path.join(site_dir, "index.html"), encoding="utf-8") as f:
        page = f.read()
    nav = page[page.find('<nav class="md-nav md-nav--primary"'):]
    nav = nav[:nav.find("</nav>\n</div>") if "</nav>\n</div>" in nav else len(nav)]
    return set(re.findall(r'href="([^"]+)"', nav))


def skip_reason(code):
    """The reason of an example that starts with `# skip-example: REASON` (as the docstrings mark one), or None."""
    first = next((line for line in code.splitlines() if line.strip()), "")
    match = re.match(r"^\s*#\s*skip-example:(.*)$", first)
    return match.group(1).strip() if match else None


RUNNER = """
import os
failures = []
for index, code in enumerate(EXAMPLES):
    namespace = {"__name__": "__main__"}
    os.chdir(WORKDIRS[index])
    try:
        exec(compile(code, f"<example {index}>", "exec"), namespace)
    except BaseException as e:
        failures.append((index, type(e).__name__, str(e)[:300]))
for index, kind, message in failures:
    print(f"FAILED {index} {kind}: {message}")
"""


def run_examples(examples, cwd, timeout=900):
    """Runs each example in its own fresh namespace of one new interpreter, nothing injected.

    Args:
        examples: the code of each example.
        cwd: the working directory of every example, or a list with one per example (an example that
            writes a file then meets no other example's file of the same name).
        timeout: seconds for all of them together.

    Returns:
        `[(index, exception name, message)]` of the examples that raised.
    """
    workdirs = [os.fspath(cwd)] * len(examples) if isinstance(cwd, (str, os.PathLike)) else [
        os.fspath(folder) for folder in cwd]
    cwd = workdirs[0] if workdirs else REPO
    script = f"EXAMPLES = {examples!r}\nWORKDIRS = {workdirs!r}\n{RUNNER}"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
    result = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    failures = []
    for line in result.stdout.splitlines():
        match = re.match(r"FAILED (\d+) (\w+): (.*)", line)
        if match:
            failures.append((int(match.group(1)), match.group(2), match.group(3)))
    if result.returncode != 0 and not failures:
        failures.append((-1, "InterpreterError", result.stderr[-500:]))
    return failures
