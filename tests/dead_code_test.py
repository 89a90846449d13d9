"""The dead-code scan: vulture at 80% confidence finds nothing in xlnet_tf/, pipelines/ and tools/
that `tools/vulture_whitelist.py` does not list with its reason."""

import os

import vulture

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHITELIST = os.path.join(REPO, "tools", "vulture_whitelist.py")
MIN_CONFIDENCE = 80


def _findings(paths):
    scan = vulture.Vulture()
    scan.scavenge(paths)
    return [f"{os.path.relpath(item.filename, REPO)}:{item.first_lineno}: {item.message} "
            f"({item.confidence}% confidence)" for item in scan.get_unused_code(min_confidence=MIN_CONFIDENCE)]


def test_the_scan_finds_nothing_that_is_not_whitelisted():
    findings = _findings([os.path.join(REPO, folder) for folder in ("xlnet_tf", "pipelines", "tools")])
    assert not findings, ("Dead code: remove it, or list it in tools/vulture_whitelist.py with the reason it "
                          "stays:\n" + "\n".join(findings))


def test_the_scan_reports_an_unused_function(tmp_path):
    # The scan itself works: without the whitelist, a module-level function nothing calls is reported.
    (tmp_path / "module.py").write_text("def used():\n    return 1\n\n\ndef unused():\n    return used()\n")
    scan = vulture.Vulture()
    scan.scavenge([str(tmp_path)])
    assert [(item.name, item.typ) for item in scan.get_unused_code(min_confidence=60)] == [("unused", "function")]


def test_every_whitelisted_name_comes_with_its_reason():
    with open(WHITELIST, encoding="utf-8") as f:
        blocks = f.read().split('"""', 2)[2].strip().split("\n\n")
    names = []
    for block in blocks:
        lines = block.splitlines()
        entries = [line for line in lines if line.strip() and not line.startswith("#")]
        assert not entries or lines[0].startswith("#"), f"whitelist entries without a reason: {entries}"
        names += entries
    assert names, "the whitelist lists no names"
    assert all(name.isidentifier() for name in names), names
