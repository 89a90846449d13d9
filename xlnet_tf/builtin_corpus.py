"""A real English corpus that every Python installation already has: its documentation strings.

The quick start needs natural-language text offline without shipping any. The
standard library (and whatever packages are installed) carries megabytes of
English prose in module, class and function docstrings. They are read from the
`.py` sources with `ast` (no module is imported), split into one sentence per
line, and written in the original XLNet corpus convention: one sentence per
line, a blank line between documents (one docstring = one document).
Code-like lines (doctests, signatures, tables) are dropped.
"""

import ast
import os
import re
import sys
import sysconfig

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_WORD = re.compile(r"[A-Za-z]{2,}")


def _source_roots(include_site_packages):
    roots = [sysconfig.get_paths()["stdlib"]]
    if include_site_packages:
        roots.append(sysconfig.get_paths()["purelib"])
    return [r for r in roots if os.path.isdir(r)]


def _docstrings(path):
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (SyntaxError, ValueError, UnicodeDecodeError, OSError, RecursionError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=True)
            if text:
                yield text


def _is_prose(line):
    if len(line) < 20 or line.startswith((">>>", "...", "$", "%", "#", "|", "+", "-", "=", "*", ":")):
        return False
    words = _WORD.findall(line)
    letters = sum(len(w) for w in words)
    return len(words) >= 4 and letters >= 0.6 * len(line) and "()" not in line[:3]


def _sentences(docstring):
    paragraphs = re.split(r"\n\s*\n", docstring)
    for paragraph in paragraphs:
        lines = [line.strip() for line in paragraph.splitlines()]
        if any(line.startswith((">>>", "::")) or line.endswith("::") for line in lines):
            continue
        text = " ".join(line for line in lines if line)
        for sentence in _SENTENCE_END.split(text):
            sentence = sentence.strip()
            if _is_prose(sentence):
                yield sentence


def write_builtin_corpus(path, *, max_bytes=6_000_000, include_site_packages=False,
                         heldout_path=None, heldout_every=50):
    """Writes the docstring corpus to `path`; returns `(documents, sentences, bytes)`.

    Args:
        path: output text file.
        max_bytes: stop once this much text is written.
        include_site_packages: also read installed third-party packages.
        heldout_path: optional file for held-out text: every `heldout_every`-th
            document goes there instead of `path` (never trained on, so a trained
            model can be shown sentences it has not seen).
        heldout_every: see `heldout_path`.

    Returns:
        `(documents, sentences, bytes)` written to `path`.

    Example:
    >>> import os, tempfile
    >>> from xlnet_tf import write_builtin_corpus
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> documents, sentences, size = write_builtin_corpus(path, max_bytes=20_000)
    >>> 0 < size <= 20_000 + 2_000 and documents > 0
    True
    """
    seen = set()
    heldout = open(heldout_path, "w", encoding="utf-8") if heldout_path else None
    try:
        return _write(path, max_bytes, include_site_packages, seen, heldout, heldout_every)
    finally:
        if heldout:
            heldout.close()


def _write(path, max_bytes, include_site_packages, seen, heldout, heldout_every):
    documents = sentences = written = candidates = 0
    with open(path, "w", encoding="utf-8") as out:
        for root in _source_roots(include_site_packages):
            for directory, subdirs, files in os.walk(root):
                subdirs[:] = sorted(d for d in subdirs if d not in ("test", "tests", "idlelib", "__pycache__"))
                for name in sorted(files):
                    if not name.endswith(".py"):
                        continue
                    for docstring in _docstrings(os.path.join(directory, name)):
                        lines = [s for s in _sentences(docstring) if s not in seen]
                        if len(lines) < 2:
                            continue
                        seen.update(lines)
                        block = "\n".join(lines) + "\n\n"
                        candidates += 1
                        if heldout and candidates % heldout_every == 0:
                            heldout.write(block)
                            continue
                        out.write(block)
                        documents += 1
                        sentences += len(lines)
                        written += len(block.encode("utf-8"))
                        if written >= max_bytes:
                            return documents, sentences, written
    return documents, sentences, written


if __name__ == "__main__":
    print(write_builtin_corpus(sys.argv[1]))
