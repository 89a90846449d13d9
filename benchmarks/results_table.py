"""The one results table, `benchmarks/RESULTS.md`, and its bar chart, written by the benchmark scripts.

Every benchmark script takes two flags from `add_arguments`:

- `--write-results [FILE]`: after the run, upsert the rows it measured into FILE (default
  `benchmarks/RESULTS.md`): one row per comparison with the ratio, the date, the machine and the command that
  reproduces it. A row of the same comparison is replaced, the others are kept.
- `--from-results-file PATH`: do not measure; rebuild the rows from a results file the script wrote earlier
  (its `*_results.txt`), with the date, machine and command recorded there, newest run first.

Each script names its rows with one function, `result_rows(section)`, that reads a `Section` (a table the
script printed and the lines around it) and returns `Row`s; `run(main, script, result_rows)` wraps the
script's `main`. The table file and `results.png` (the main ratios against the peer as bars, drawn with
matplotlib's Agg backend) are written under a temporary name and renamed.

Example:

```python
def result_rows(section):
    return [results_table.Row(f"backbone {r['mode']}, seq {r['seq']}", "Hugging Face PyTorch",
                              results_table.number(r["balanced"]), "speed")
            for r in section.rows if "PyTorch" in r["ratio"]]

if __name__ == "__main__":
    sys.exit(results_table.run(main, __file__, result_rows))
```
"""

import argparse
import json
import contextlib
import dataclasses
import datetime
import importlib.util
import io
import os
import re
import shlex
import sys
import tempfile

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCHMARKS)
RESULTS_FILE = os.path.join(BENCHMARKS, "RESULTS.md")
CHART_NAME = "results.png"
MEASURES = {
    "speed": "x the speed",  # higher: ours is faster
    "time": "x the time",  # lower: ours is faster
    "nats": "x the loss",  # lower: ours predicts better
    "GB": " GB",  # an absolute figure, no peer
}
HEADER = ("| comparison | against | ratio | date | machine | command |", "|---|---|---|---|---|---|")
METHOD = """# Benchmark results

Written by the scripts in `benchmarks/` (`--write-results`), one row per comparison; do not edit by hand.
`python benchmarks/NAME.py ... --write-results` measures and replaces its rows; `--from-results-file
benchmarks/NAME_results.txt` rebuilds them from that script's recorded runs. `results.png` shows the ratios
against Hugging Face's PyTorch XLNet as speed (a time ratio is inverted: above 1, ours is faster).

## Method

- **Side by side, in the same run.** Our code and the peer (Hugging Face's PyTorch XLNet, or raw SentencePiece
  for the Beam job) run on the same inputs and sizes within one command; only ratios taken within a run are
  compared, never figures of different runs.
- **Interleaved.** Where a script says "paired" or "balanced", two long-lived workers take turns, one timed step
  each per round after an untimed one, so a change of the machine's speed hits both alike. The pair runs twice,
  each worker started first once; the ratio is the geometric mean of the two orders' median same-round ratios,
  which a slowdown tied to the start order cannot move. Other rows are the fastest of a few timed steps, one
  process per measurement.
- **Ratios.** "x the speed": ours over the peer in tokens or examples per second (above 1: ours faster).
  "x the time": ours over the peer in latency or step time (below 1: ours faster). "x the loss": held-out nats
  per masked word (below 1: ours better). Absolute figures (GB) have no peer.
- **Load.** The machine column gives the cores and the load average of the run; a shared machine moves
  absolute speeds by tens of percent, ratios much less. No GPU or TPU figure is in this table.
"""


@dataclasses.dataclass(frozen=True)
class Row:
    """One comparison: what is compared, against what, the ratio and its measure; where and how it was run."""

    comparison: str
    against: str
    ratio: float
    measure: str
    date: str = ""
    machine: str = ""
    command: str = ""

    def __post_init__(self):
        if self.measure not in MEASURES:
            raise ValueError(f"measure {self.measure!r} of {self.comparison!r}: expected one of {sorted(MEASURES)}")

    @property
    def key(self):
        return (self.comparison, self.against)

    def markdown(self):
        ratio = f"{self.ratio:.3f}" if self.measure == "GB" else f"{self.ratio:.2f}"
        cells = (self.comparison, self.against or "-", ratio + MEASURES[self.measure], self.date, self.machine,
                 f"`{self.command}`")
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


@dataclasses.dataclass
class Section:
    """A markdown table of a script's report, as dicts keyed by its header, with the lines around it.

    `date`, `command` and `load` are the last ones named before the table (inherited from earlier tables when
    the lines before it name none); `load` is the load average its own lines name; `context` is the text from
    the previous table's notes to the next run's title.
    """

    header: list
    rows: list
    context: str
    date: str
    command: str
    load: str


def is_number(cell):
    """Whether a table cell holds a figure (not `failed: ...`, `-` or empty)."""
    return bool(re.match(r"^\**-?\d", cell.strip()))


def measured(section, column):
    """The rows of `section` whose `column` holds a figure: not a failed or skipped measurement."""
    return [cells for cells in section.rows if is_number(cells[column])]


def number(cell):
    """The first number of a table cell: `'**1.45x**'` -> 1.45."""
    match = re.search(r"-?\d+(?:,\d{3})*(?:\.\d+)?", cell)
    if not match:
        raise ValueError(f"no number in the table cell {cell!r}")
    return float(match.group(0).replace(",", ""))


def _table_cells(line):
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


_DATE = re.compile(r"\b(20\d\d-\d\d-\d\d)\b")
_COMMAND = re.compile(r"python benchmarks/\w+\.py(?:[ \t]+(?:\"[^\"]*\"|'[^']*'|--?[\w.=/,:*-]+|[\w.=/,:*-]+))*")
_LOAD = re.compile(r"load average(?: \([^)]*\))?[^\d\n]{0,20}(\d+(?:\.\d+)?(?:\s*-\s*\d+(?:\.\d+)?)?)")


def commands(text):
    """Every `python benchmarks/NAME.py ...` command a text names, in order."""
    return [c.strip() for c in _COMMAND.findall(text)]


def sections(text, date="", command=""):
    """Every markdown table of a report, newest run first as the results files keep them."""
    lines = text.splitlines()
    found, index, before = [], 0, []
    while index < len(lines):
        if not lines[index].startswith("|"):
            before.append(lines[index])
            index += 1
            continue
        start = index
        while index < len(lines) and lines[index].startswith("|"):
            index += 1
        table = [_table_cells(line) for line in lines[start:index] if not re.match(r"^\|[-| ]+\|$", line)]
        after = []
        while index < len(lines) and not (lines[index].startswith("|") or _DATE.search(lines[index])
                                          or _COMMAND.search(lines[index])):
            after.append(lines[index])  # the table's own notes ("load average ... at end"), not the next run's
            index += 1
        context = "\n".join(before + after)
        dates = _DATE.findall("\n".join(before))
        named = commands("\n".join(before))
        date = dates[-1] if dates else date
        command = named[-1] if named else command
        loads = [float(x) for found_load in _LOAD.findall(context) for x in re.split(r"\s*-\s*", found_load)]
        load = ""  # a run's own: never inherited from an earlier table
        if loads:
            low, high = min(loads), max(loads)
            load = f"{low:g}" if low == high else f"{low:g}-{high:g}"
        header, body = table[0], table[1:]
        found.append(Section(header, [dict(zip(header, cells)) for cells in body], context, date, command, load))
        before = []
    return found


def paired_rows(section, what):
    """Rows of an interleaved-pairs table (columns `ratio` and `balanced`, as `interleaved_steps` prints them).

    `what` names the measurement and its size from a table row, e.g. `lambda r: f"backbone, seq {r['seq']}"`.
    """
    if not {"ratio", "balanced"} <= set(section.header):
        return []
    rows = []
    for cells in section.rows:
        text = cells["ratio"]
        measure = "speed" if "(speed)" in text else "time"
        name = re.sub(r" \((?:speed|step time|time)\)$", "", text)
        against = "Hugging Face PyTorch" if "PyTorch" in name else name.split(" / ", 1)[-1]
        rows.append(Row(f"{what(cells)}: {name}", against, number(cells["balanced"]), measure))
    return rows


def machine_now():
    """This machine: cores, CPU model, load average (the machine column of a row measured now)."""
    model = "CPU"
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = re.findall(r"^model name\s*:\s*(.+)$", f.read(), re.MULTILINE)
        model = names[0].strip() if names else model
    return f"{os.cpu_count()}-core {model}, CPU only, load average {os.getloadavg()[0]:.1f}"


def recorded_machine(section):
    """The machine a results file records: the benchmarks' 2-core VM, with the run's load average."""
    load = f"load average {section.load}" if section.load else "load average not recorded"
    return f"2-core AMD EPYC VM, CPU only, {load}"


def read_rows(path):
    """The rows of a RESULTS.md, or none when it does not exist yet."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = _table_cells(line) if line.startswith("| ") and not line.startswith(HEADER[0]) else []
            if len(cells) != 6:
                continue
            comparison, against, ratio, date, machine, command = (c.replace("\\|", "|") for c in cells)
            measure = next(m for m, suffix in MEASURES.items() if ratio.endswith(suffix))
            rows.append(Row(comparison, "" if against == "-" else against, number(ratio), measure, date, machine,
                            command.strip("`")))
    return rows


def _write_atomically(path, write, suffix):
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=folder)
    os.close(handle)
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


def upsert(rows, path=RESULTS_FILE):
    """Replaces the rows of the same comparisons in `path` (keeping the others), then redraws the chart."""
    if not rows:
        raise ValueError(f"no result rows to write into {path}")
    by_key = {row.key: row for row in read_rows(path)}
    by_key.update((row.key, row) for row in rows)
    table = sorted(by_key.values(), key=lambda row: (row.command.split(" ")[:2], row.comparison, row.against))
    text = METHOD + "\n## Results\n\n" + "\n".join([*HEADER, *(row.markdown() for row in table)]) + "\n"
    chart = os.path.join(os.path.dirname(os.path.abspath(path)), CHART_NAME)
    text += f"\n![Ratios against Hugging Face's PyTorch XLNet]({CHART_NAME})\n"

    def write_text(temporary):
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)

    _write_atomically(path, write_text, ".md")
    draw_chart(table, chart)
    return table


def chart_rows(rows):
    """The main ratios the chart shows, as (label, ours' speed over the peer's): speed and time against
    Hugging Face, leaving out the variants of a row (strings in beside ids in, XLA beside no XLA)."""
    shown = []
    for row in rows:
        if not row.against.startswith("Hugging Face") or row.measure not in ("speed", "time"):
            continue
        if "strings" in row.comparison or "+XLA" in row.comparison:
            continue
        shown.append((row.comparison, row.ratio if row.measure == "speed" else 1.0 / row.ratio))
    return shown


def draw_chart(rows, path):
    """A horizontal bar per ratio against Hugging Face (as speed: above the line at 1, ours is faster)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter

    shown = chart_rows(rows)
    if not shown:
        return
    figure, axis = plt.subplots(figsize=(11, 0.42 * len(shown) + 1.2))
    labels, values = zip(*reversed(shown))
    axis.barh(range(len(values)), values, color=["#2a7ab9" if v >= 1 else "#c0504d" for v in values])
    axis.set_yticks(range(len(values)), [textwrap.fill(label, 62) for label in labels], fontsize=7)
    axis.axvline(1.0, color="black", linewidth=0.8)
    axis.set_xscale("log")
    axis.xaxis.set_major_formatter(FormatStrFormatter("%gx"))
    axis.set_xlim(right=max(values) * 1.6)  # room for the last bar's figure
    axis.set_xlabel("ours / Hugging Face PyTorch, as speed (log scale; 1 = equal)")
    for position, value in enumerate(values):
        axis.text(value, position, f" {value:.2f}x", va="center", fontsize=7)
    figure.tight_layout()

    def save(temporary):
        figure.savefig(temporary, format="png", dpi=110)

    try:
        _write_atomically(path, save, ".png")
    finally:
        plt.close(figure)


def add_arguments(parser):
    """Adds `--write-results [FILE]` and `--from-results-file PATH` to a benchmark's parser."""
    parser.add_argument("--write-results", nargs="?", const=RESULTS_FILE, default=None, metavar="FILE",
                        help=f"upsert this run's rows into FILE (default {os.path.relpath(RESULTS_FILE, REPO)})")
    parser.add_argument("--from-results-file", default=None, metavar="PATH",
                        help="with --write-results: rebuild the rows from this recorded results file, no run")
    return parser


def parse_arguments(parser, argv, child):
    """Parses a benchmark's `argv` after adding the results flags and `--child SPEC`.

    A benchmark measures each setting in a fresh process of itself (`--child` with a JSON
    spec); that process runs `child(spec)` and this returns None, so `main` returns at once.
    """
    parser.add_argument("--child", help=argparse.SUPPRESS)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return None
    return args


def _own_flags(argv):
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    own, rest = parser.parse_known_args(argv)
    return own, rest


def reproducing_command(script, argv):
    """`python benchmarks/NAME.py FLAGS` without the results flags: the command that measures again."""
    _, rest = _own_flags(argv)
    return shlex.join(["python", os.path.relpath(os.path.abspath(script), REPO), *rest])


def rows_from_report(text, result_rows):
    """The rows a report names, newest first, one per comparison, stamped with where and how it was run."""
    rows = {}
    for section in sections(text):
        for row in result_rows(section):
            stamped = dataclasses.replace(row, date=row.date or section.date,
                                          machine=row.machine or recorded_machine(section),
                                          command=row.command or section.command)
            rows.setdefault(stamped.key, stamped)
    return list(rows.values())


class _Tee(io.TextIOBase):
    def __init__(self, stream):
        self.stream, self.buffer = stream, io.StringIO()

    def write(self, text):
        self.buffer.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


def run(main, script, result_rows, argv=None):
    """Runs a benchmark's `main` and, with `--write-results`, upserts the rows its report names.

    With `--from-results-file PATH` it does not run `main`: the rows come from that recorded file.
    """
    argv = sys.argv[1:] if argv is None else argv
    own, _ = _own_flags(argv)
    if own.from_results_file and not own.write_results:
        own.write_results = RESULTS_FILE
    if own.from_results_file:
        if not os.path.exists(own.from_results_file):
            sys.exit(f"--from-results-file {own.from_results_file}: no such file")
        with open(own.from_results_file, encoding="utf-8") as f:
            rows = rows_from_report(f.read(), result_rows)
        if not rows:
            sys.exit(f"--from-results-file {own.from_results_file}: no result rows of "
                     f"{os.path.basename(script)} in it")
        upsert(rows, own.write_results)
        print(f"{len(rows)} rows from {own.from_results_file} written to {os.path.relpath(own.write_results)}")
        return 0
    if not own.write_results:
        return main()
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        status = main()
    if status not in (None, 0):
        return status
    rows = rows_from_report(tee.buffer.getvalue(), result_rows)
    if not rows:
        sys.exit(f"--write-results: the run printed no result rows of {os.path.basename(script)}")
    # Measured now: the run's own date, machine and command, not what the report's titles name.
    now = {"date": datetime.date.today().isoformat(), "machine": machine_now(),
           "command": reproducing_command(script, argv)}
    upsert([dataclasses.replace(row, **now) for row in rows], own.write_results)
    print(f"{len(rows)} rows written to {os.path.relpath(own.write_results)}")
    return 0


def load_script(path):
    """A benchmark script loaded as a module (its `main` and `result_rows`), without running it."""
    for folder in (REPO, BENCHMARKS):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"_benchmark_{os.path.basename(path)[:-3]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _FlagsParsed(Exception):
    pass


def check_command(command):
    """Raises ValueError unless `command` runs a script of `benchmarks/` with flags its parser accepts.

    The script's `main` runs until its parser has parsed the flags, and stops there.
    """
    words = shlex.split(command)
    if len(words) < 2 or words[0] != "python" or not re.fullmatch(r"benchmarks/\w+\.py", words[1]):
        raise ValueError(f"{command!r}: expected `python benchmarks/NAME.py FLAGS`")
    path = os.path.join(REPO, words[1])
    if not os.path.exists(path):
        raise ValueError(f"{command!r}: {words[1]} does not exist")
    module = load_script(path)
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, args=None, namespace=None):
        original(parser, args, namespace)
        raise _FlagsParsed

    saved_argv, errors = sys.argv, io.StringIO()
    argparse.ArgumentParser.parse_args = parse_then_stop
    sys.argv = [path, *words[2:]]
    try:
        with contextlib.redirect_stderr(errors):
            module.main()
    except _FlagsParsed:
        return
    except SystemExit:
        raise ValueError(f"{command!r}: {errors.getvalue().strip().splitlines()[-1:]}") from None
    finally:
        argparse.ArgumentParser.parse_args = original
        sys.argv = saved_argv
    raise ValueError(f"{command!r}: {words[1]}'s main returned before parsing its flags")
