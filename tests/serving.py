"""Helpers for the `kvreg serve` tests: a server process on a free loopback port, plain HTTP calls,
and Debian's Chromium driven headless by Selenium (never a downloaded browser or driver)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("KVREG_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KVREG_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1000")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kvreg_command() -> list[str]:
    """The installed `kvreg` beside this Python, as a user runs it."""
    exe = Path(sys.executable).parent / "kvreg"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from kvreg.cli import main; sys.argv[0] = 'kvreg'; main()"]


class Server:
    """`kvreg --db URL serve --port P [extra]` as a child process; .base is its http://127.0.0.1:P."""

    def __init__(self, url: str, *extra: str, host: str = "127.0.0.1"):
        # A port found free can be taken before the server binds it (tests run in parallel under
        # pytest-xdist): then kvreg serve says "cannot listen" and another port is tried.
        self.host = host
        for _ in range(5):
            if self._start(url, extra):
                break
        if len(self.banner) < 3:
            raise AssertionError(f"kvreg serve exited {self.proc.wait()}: {''.join(self.banner)}")
        for _ in range(600):
            try:
                urllib.request.urlopen(self.base + "/static/kvreg.css", timeout=5).read()
                break
            except (urllib.error.URLError, ConnectionError):
                if self.proc.poll() is not None:
                    raise AssertionError(f"kvreg serve exited {self.proc.returncode}: {''.join(self.banner)}") from None
                import time

                time.sleep(0.05)

    def _start(self, url: str, extra: tuple[str, ...]) -> bool:
        """Start kvreg serve on a free port and read its start lines (printed once the socket is
        bound); False when it exited because that port was taken meanwhile."""
        self.port = free_port()
        self.base = f"http://{self.host}:{self.port}"
        cmd = [*kvreg_command(), "--db", url, "serve", "--port", str(self.port), *extra]
        if self.host != "127.0.0.1":
            cmd += ["--host", self.host]
        env = {k: v for k, v in os.environ.items() if k != "KVREG_DB"}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.banner = []
        for _ in range(3):
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                return "cannot listen on" not in "".join(self.banner)
            self.banner.append(line)
        return True

    def get(self, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
        return self.request("GET", path, headers=headers)

    def post(self, path: str, form: dict, headers: dict | None = None) -> tuple[int, dict, bytes]:
        return self.request("POST", path, urllib.parse.urlencode(form).encode(), headers)

    def request(self, method: str, path: str, data: bytes | None = None, headers: dict | None = None):
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers or {})
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(req, timeout=120) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def csrf_token(self, path: str = "/plans/new") -> str:
        status, _, body = self.get(path)
        assert status == 200, body[:500]
        return re.search(rb'name="csrf_token" value="([^"]+)"', body).group(1).decode()

    def stop(self) -> str:
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return "".join(self.banner) + (out or "")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # the tests look at the 303 itself
        return None


def chromium(tmp_path: Path):
    """A headless Chromium (Selenium) with a fresh profile; skips without Chromium, fails under CI=true."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package")
    if missing:
        why = f"browser tests need {', '.join(missing)} (Debian: apt-get install chromium chromium-driver)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {why}", pytrace=False)
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    # The driver's path is given, so Selenium Manager never looks for (or downloads) one.
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
