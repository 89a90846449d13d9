"""Download time limits: a per-read timeout (`--timeout`, `$XLNET_TF_DOWNLOAD_TIMEOUT`) for a server that
stops sending, an overall deadline (`--deadline`, `$XLNET_TF_DOWNLOAD_DEADLINE`) for one that trickles bytes.
Each failure names the file, the URL and the limit, and leaves nothing in the cache."""

import time

import pytest

from tests.presets.conftest import RELEASE_ARCHIVE, leftovers, release_zip_bytes
from xlnet_tf.cli import main as cli
from xlnet_tf.presets import PresetError, download_preset

ROUTE = "/xlnet/released_models/" + RELEASE_ARCHIVE


def _timed_cli(argv):
    started = time.monotonic()
    code = cli.main(argv)
    return code, time.monotonic() - started


def test_stalled_server_hits_the_read_timeout(server, presets_dir, capsys):
    server.add_gcs_object(ROUTE, release_zip_bytes(), stall=3.0)
    code, elapsed = _timed_cli(["presets", "--download", "xlnet_base_cased", "--timeout", "0.4"])
    assert code == 1 and elapsed < 2.5
    url = server.url(ROUTE)
    assert capsys.readouterr().err.strip() == (
        f"xlnet-tf presets: {RELEASE_ARCHIVE}: no data from {url} for 0.4 s (the per-read timeout) after 0 bytes "
        f"of {len(release_zip_bytes())} received. Nothing was cached. A slow connection or proxy: raise it with "
        "--timeout SECONDS or $XLNET_TF_DOWNLOAD_TIMEOUT.")
    assert leftovers(presets_dir) == []


def test_server_that_never_answers_hits_the_timeout_from_the_environment(server, presets_dir, monkeypatch):
    server.add_gcs_object(ROUTE, release_zip_bytes(), delay=3.0)  # no headers at all
    monkeypatch.setenv("XLNET_TF_DOWNLOAD_TIMEOUT", "0.4")
    started = time.monotonic()
    with pytest.raises(PresetError, match=r"no data from http://127\.0\.0\.1:\d+/xlnet/released_models/"
                                          r"cased_L-12_H-768_A-12\.zip for 0\.4 s \(the per-read timeout\)"):
        download_preset("xlnet_base_cased")
    assert time.monotonic() - started < 2.5 and leftovers(presets_dir) == []


def test_trickling_server_hits_the_deadline(server, presets_dir, capsys, monkeypatch):
    # One byte every 50 ms never trips a read timeout; the body would take minutes.
    server.add_gcs_object(ROUTE, release_zip_bytes(), trickle=0.05)
    code, elapsed = _timed_cli(["presets", "--download", "xlnet_base_cased", "--timeout", "5", "--deadline", "1"])
    assert code == 1 and 1.0 <= elapsed < 3.0
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress lines
    assert err.startswith(f"xlnet-tf presets: {RELEASE_ARCHIVE}: the download from {server.url(ROUTE)} did not "
                          "finish within the 1 s deadline (")
    assert err.endswith(f" of {len(release_zip_bytes())} received). Nothing was cached. Raise it with "
                        "--deadline SECONDS or $XLNET_TF_DOWNLOAD_DEADLINE.")
    assert leftovers(presets_dir) == []

    monkeypatch.setenv("XLNET_TF_DOWNLOAD_DEADLINE", "0.5")
    started = time.monotonic()
    with pytest.raises(PresetError, match="did not finish within the 0.5 s deadline"):
        download_preset("xlnet_base_cased")
    assert time.monotonic() - started < 2.0


def test_limits_do_not_stop_a_normal_download(server, presets_dir, monkeypatch, capsys):
    server.add_gcs_object(ROUTE, release_zip_bytes())
    monkeypatch.setenv("XLNET_TF_DOWNLOAD_DEADLINE", "60")
    assert cli.main(["presets", "--download", "xlnet_base_cased", "--timeout", "5"]) == 0
    assert leftovers(presets_dir) == ["xlnet_base_cased"]


@pytest.mark.parametrize("argv, message", [
    (["--download", "xlnet_base_cased", "--timeout", "0"], "argument --timeout: '0' is not a number of seconds > 0"),
    (["--download", "xlnet_base_cased", "--deadline", "soon"],
     "argument --deadline: 'soon' is not a number of seconds > 0"),
    (["--download", "xlnet_base_cased", "--timeout", "inf"], "argument --timeout: 'inf' is not a number of seconds"),
    (["--timeout", "5"], "xlnet-tf presets: --timeout applies to --download only."),
    (["--deadline", "5"], "xlnet-tf presets: --deadline applies to --download only."),
])
def test_bad_limits_are_usage_errors(argv, message, server, capsys):
    try:
        code = cli.main(["presets"] + argv)
    except SystemExit as e:
        code = e.code
    assert code == 2 and message in capsys.readouterr().err
    assert server.requests == {}


def test_bad_environment_value_names_the_variable(server, monkeypatch):
    monkeypatch.setenv("XLNET_TF_DOWNLOAD_DEADLINE", "ten minutes")
    with pytest.raises(PresetError, match=r"^Download deadline: \$XLNET_TF_DOWNLOAD_DEADLINE = 'ten minutes' is "
                                          r"not a number of seconds > 0\.$"):
        download_preset("xlnet_base_cased")
    assert server.requests == {}
