"""`memsync ui` as a command: bad input is an error line with a hint; the real process prints
its URL, serves, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import http.cookiejar
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import Cli
from tests.ui.conftest import World


@pytest.mark.slow  # (the shared world's first build)
def test_a_memory_the_hub_lacks_or_a_bad_port_is_a_usage_error(world: World, cli: Cli) -> None:
    r = cli("ui", "--memory", "nothere", "--no-open")
    assert r.code == 2 and "error: the hub" in r.err and "no memory 'nothere'" in r.err and "hint:" in r.err
    r = cli("ui", "--memory", "Bad_Name", "--no-open")
    assert r.code == 2 and "error:" in r.err
    r = cli("ui", "--port", "70000", "--no-open")
    assert r.code == 2 and "not a port" in r.err
    assert r.out == ""


@pytest.mark.slow
@pytest.mark.server
def test_the_command_prints_its_url_serves_and_stops_on_ctrl_c(world: World) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "memsync", "ui", "--no-open", "--memory", "research"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "/?token=" in url
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        body = ""
        deadline = time.monotonic() + 60
        while "research" not in body:
            assert time.monotonic() < deadline, "the page did not answer"
            try:
                body = opener.open(url, timeout=30).read().decode()  # the token, then its cookie
            except OSError:
                time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "memsync ui: stopped" in err and "Traceback" not in err


def test_a_browser_is_opened_only_where_it_would_get_a_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a display, webbrowser would run a text browser in the terminal the page runs in."""
    from memsync.ui import server

    monkeypatch.setattr(sys, "platform", "linux")
    for key in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"):
        monkeypatch.delenv(key, raising=False)
    assert not server._graphical()
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    assert server._graphical()
