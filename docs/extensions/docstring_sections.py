"""A Griffe extension that reads the project's docstrings as the API reference shows them.

The docstrings follow keras-hub's Google style with two habits Griffe's Google parser reads
differently, and say argument types in words rather than annotations. Before mkdocstrings
renders a page, this extension rewrites each docstring (the source is untouched):

- `Example:` becomes `Examples:` and its body is indented, so `>>>` lines render as code
  (unindented, Markdown reads them as nested blockquotes). Fenced blocks are kept.
- `Call arguments:` (what `__call__` takes, keras-hub's section) becomes a list, one item per
  argument, instead of one run-together paragraph.
- An argument without a type gets one from what the docstring says first (`training: bool,
  ...`, `backbone: an XLNetBackbone.`) or, failing that, from a literal default (`dropout=0.1`
  is a float). The type is written into the docstring (`name (type): ...`) and into the
  signature, so it shows in both and links to its page where it names a documented class.
- Backquoted names of documented classes and functions (`` `XLNetBackbone` ``) become links
  to their pages.
- A function that a package defines under the name of one of its submodules (`xlnet_tf.tasks.task_type`)
  is filed under that submodule (`xlnet_tf.tasks.task_type.task_type`), the path its page names: Griffe
  keeps one object per path and gives it to the submodule, so the function would otherwise be lost and
  its page would show the module.

mkdocs.yml loads it (`extensions: [docs/extensions/docstring_sections.py]`);
`tests/docs/site_test.py` checks the built pages.
"""

import ast
import os
import re

import griffe

_EXAMPLE_HEADER = re.compile(r"^Examples?:\s*$")
# Section titles Griffe's Google parser knows, plus keras-hub's "Call arguments".
_HEADER = re.compile(r"^(Args|Arguments|Call arguments(?: \(.*\))?|Returns|Yields|Raises|Attributes|Note|Notes|"
                     r"References|See also|Warning|Warnings|Todo|Examples?|Keyword Args|Keyword Arguments|"
                     r"Other Parameters):"
                     r"\s*$")
_ARGS_HEADER = re.compile(r"^(Args|Arguments|Keyword Args|Keyword Arguments|Other Parameters):\s*$")
_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_]\w*)(\s*\([^)]*\))?:(\s.*|)$")
_BUILTIN_WORDS = {"int": "int", "integer": "int", "float": "float", "bool": "bool", "boolean": "bool",
                  "str": "str", "string": "str", "dict": "dict", "list": "list", "tuple": "tuple",
                  "bytes": "bytes", "callable": "Callable", "path": "str"}
_LEADING_TYPE = re.compile(r"^(?:an?\s+|the\s+|optional\s+|the trained\s+)?`?([A-Za-z_][\w.]*)`?(?=[\s,.;:)\]]|$)")
# What a description says first, in words, and the type it means.
_WORDED_TYPES = [
    (re.compile(r"^(?:an? |the |optional )?(?:preset name|(?:output )?director(?:y|ies)\b|(?:output )?(?:text )?file\b|"
                r"spiece\.model path|path\b|where to write)", re.IGNORECASE), "str"),
    (re.compile(r"^(?:the )?(?:number of|id of|rows each|how many|output length)", re.IGNORECASE), "int"),
    (re.compile(r"^(?:the )?(?:dropout )?rate\b", re.IGNORECASE), "float"),
    (re.compile(r"^(?:total )?(?:optimizer )?updates\b", re.IGNORECASE), "int"),
    (re.compile(r"^(?:the call's )?training flag|^whether\b", re.IGNORECASE), "bool"),
    (re.compile(r"^(?:an? |the )?(?:JSON-serialisable )?dict\b|^the backbone inputs", re.IGNORECASE), "dict"),
    (re.compile(r"^an? dtype policy", re.IGNORECASE), "str | keras.DTypePolicy"),
    # An array described by its dtype and shape: `int32 [B, T]`, `int/bool [B, T]`, `int32 scalar`.
    (re.compile(r"^`?(?:u?int(?:8|16|32|64)?|float(?:16|32|64)?|bfloat16|bool)(?:/\w+)?`? (?:`?\[|scalar)"), "Tensor"),
    (re.compile(r"^Python int\b"), "int"),
    (re.compile(r"^an? (?:tf\.distribute\.)?strategy\b", re.IGNORECASE), "tf.distribute.Strategy"),
]
_API_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "api")
_DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$", re.MULTILINE)
_BACKQUOTED = re.compile(r"(?<![\[`\w])`([A-Za-z_][\w.]*)`(?![\]`(])")


def _indent_block(lines):
    """`lines` indented by four spaces, blank lines kept blank."""
    return ["    " + line if line.strip() else "" for line in lines]


def _sections(lines):
    """`[(start, end)]` of the top-level sections: a header line at indent 0 and its body."""
    starts = [index for index, line in enumerate(lines) if _HEADER.match(line)]
    return [(start, starts[i + 1] if i + 1 < len(starts) else len(lines)) for i, start in enumerate(starts)]


def _body(lines):
    """A section body without trailing blank lines, and whether it is already indented."""
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    indented = all(not line.strip() or line.startswith((" ", "\t")) for line in lines)
    return lines, indented


def _split_section(body):
    """`(section lines, following text)`: the text starts at a blank line followed by an unindented line."""
    for index in range(1, len(body)):
        if not body[index - 1].strip() and body[index].strip() and not body[index].startswith((" ", "\t")):
            own = body[:index - 1]
            if own and all(not line.strip() or line.startswith((" ", "\t")) for line in own):
                return own, body[index:]
    return body, []


def _call_arguments(body):
    """A "Call arguments" body as a Markdown list, indented for the admonition Griffe makes of it."""
    items = []
    base = min((len(line) - len(line.lstrip()) for line in body if line.strip()), default=0)
    for line in body:
        text = line[base:] if line.strip() else ""
        entry = _ENTRY.match(text)
        if entry and text == text.lstrip():
            items.append(f"- `{entry.group(1)}`{(entry.group(2) or '').rstrip()}:{entry.group(3)}")
        elif items and text.strip():
            items.append("  " + text.strip())
        elif not items and text.strip():
            items.append(text.strip())
    return _indent_block(items)


def rewrite(text):
    """The docstring `text` with its Example and Call arguments sections in the form Griffe renders well.

    Example:
        >>> print(rewrite("Adds.\\n\\nExample:\\n>>> 1 + 1\\n2"))
        Adds.
        <BLANKLINE>
        Examples:
            >>> 1 + 1
            2
    """
    lines = text.splitlines()
    out, previous = [], 0
    for start, end in _sections(lines):
        out += lines[previous:start]
        header = lines[start]
        body, indented = _body(lines[start + 1:end])
        trailing = lines[start + 1 + len(body):end]
        if _EXAMPLE_HEADER.match(header):
            out.append("Examples:")
            out += body if indented else _indent_block(body)
        elif header.startswith("Call arguments"):
            out.append(header)
            out += _call_arguments(body)
        else:
            # A section ends at a paragraph that starts at the left margin: that is the text after it.
            own, rest = _split_section(body)
            out.append(header)
            out += own if own and not _ARGS_HEADER.match(header) or _body(own)[1] else _indent_block(own)
            if rest:
                out += [""] + rest
        out += trailing
        previous = end
    out += lines[previous:]
    return "\n".join(out)


def _literal_type(default):
    """The type name of a literal default (`0.1` -> `float`), or None."""
    if default is None:
        return None
    try:
        value = ast.literal_eval(str(default))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if value is None:
        return None
    return type(value).__name__ if type(value).__name__ in ("int", "float", "bool", "str", "tuple", "list",
                                                             "dict", "bytes") else None


class DocstringSections(griffe.Extension):
    """Rewrites docstrings (see the module docstring) once the whole package is loaded."""

    def __init__(self):
        super().__init__()
        self._documented = {}
        self._package_functions = []

    def on_module_members(self, *, mod, **kwargs):
        # A package's own functions, seen before its submodules load (one of them may take the name).
        if mod.is_init_module:
            self._package_functions += [member for member in mod.members.values()
                                        if not member.is_alias and member.is_function]

    def on_package(self, *, pkg, **kwargs):
        self._file_shadowed_functions()
        self._documented = {}
        self._collect(pkg)
        self._visit(pkg, seen=set())

    def _file_shadowed_functions(self):
        """Files each package function that a submodule of the same name replaced under that submodule."""
        for function in self._package_functions:
            package = function.parent
            shadow = package.members.get(function.name)
            if shadow is not None and shadow is not function and not shadow.is_alias and shadow.is_module:
                if function.name not in shadow.members:
                    shadow.set_member(function.name, function)
        self._package_functions = []

    def _collect(self, module):
        """`{short name: path}` of the objects that have an API page (the `::: path` lines of docs/api)."""
        for folder, _, files in os.walk(_API_DIR):
            for file_name in files:
                if file_name.endswith(".md"):
                    with open(os.path.join(folder, file_name), encoding="utf-8") as f:
                        for path in _DIRECTIVE.findall(f.read()):
                            if path.startswith(module.path + "."):
                                self._documented.setdefault(path.rsplit(".", 1)[-1], path)

    def _visit(self, obj, seen):
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
            if obj.is_function or obj.is_class:
                self._add_types(obj)
            obj.docstring.value = self._linked(obj.docstring.value)
        for member in list(obj.members.values()):
            if not member.is_alias:
                self._visit(member, seen)

    def _linked(self, text):
        """Backquoted documented names as autorefs links, outside code blocks and doctest lines."""
        out, fenced = [], False
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith(("```", "~~~")):
                fenced = not fenced
            if fenced or stripped.startswith((">>>", "...")):
                out.append(line)
                continue
            out.append(_BACKQUOTED.sub(self._link, line))
        return "\n".join(out)

    def _link(self, match):
        name = match.group(1)
        path = self._documented.get(name.rsplit(".", 1)[-1])
        if path is None or (("." in name) and not path.endswith(name)):
            return match.group(0)
        return f"[`{name}`][{path}]"

    def _signature_function(self, obj):
        if obj.is_class:
            return obj.members.get("__init__") if "__init__" in obj.members else None
        return obj

    def _add_types(self, obj):
        """Writes `name (type):` into the Args entries that have no type, and the type into the signature."""
        function = self._signature_function(obj)
        parameters = function.parameters if function is not None and not function.is_alias else None
        lines = obj.docstring.value.splitlines()
        in_args = False
        for index, line in enumerate(lines):
            if _HEADER.match(line):
                in_args = bool(_ARGS_HEADER.match(line))
                continue
            if not in_args or not line.startswith("    ") or line.startswith("     "):
                continue
            entry = _ENTRY.match(line[4:])
            if not entry:
                continue
            name = entry.group(1)
            parameter = parameters[name.lstrip("*")] if parameters and name.lstrip("*") in parameters else None
            if entry.group(2):  # `name (type):` already: the signature shows that type too
                if parameter is not None and parameter.annotation is None:
                    written = entry.group(2).strip()[1:-1].removesuffix(", optional")
                    parameter.annotation = griffe.parse_docstring_annotation(written, obj.docstring)
                continue
            kind = self._type_of(entry.group(3).strip(), parameter)
            if kind is None:
                continue
            lines[index] = f"    {name} ({kind}):{entry.group(3)}"
            if parameter is not None and parameter.annotation is None:
                parameter.annotation = griffe.parse_docstring_annotation(kind, obj.docstring)
        obj.docstring.value = "\n".join(lines)

    def _constant_value(self, parameter):
        """A default as written, or the value of the module constant it names (`CLS_TOKEN_ID` -> `3`)."""
        default = parameter.default
        name = str(default) if default is not None else ""
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", name) and parameter.function is not None:
            try:
                constant = parameter.function.module.resolve(name)
                target = parameter.function.modules_collection.get_member(constant)
                return target.value
            except (KeyError, AttributeError, ValueError, TypeError, griffe.AliasResolutionError,
                    griffe.CyclicAliasError):
                return default
        return default

    def _type_of(self, description, parameter):
        """The type an argument's description names first, else its literal default's, else None."""
        if parameter is not None and parameter.annotation is not None:
            return None  # the signature's annotation is shown
        match = _LEADING_TYPE.match(description)
        if match:
            word = match.group(1)
            last = word.rsplit(".", 1)[-1]
            if word.lower() in _BUILTIN_WORDS:
                return _BUILTIN_WORDS[word.lower()]
            if last in self._documented:
                return last
            if word.startswith(("tf.", "keras.")) and last[:1].isupper():
                return word
            if word in ("True", "False"):
                return "bool"
        for pattern, kind in _WORDED_TYPES:
            if pattern.search(description):
                return kind
        variadic = parameter is not None and str(getattr(parameter.kind, "value", "")).startswith("var")
        if parameter is not None and not variadic:
            literal = _literal_type(self._constant_value(parameter))
            if literal:
                return literal
        return None
