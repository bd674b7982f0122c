"""Screenshots of the sample run report in headless Chromium: the images the docs show.

Usage (from the repository root; needs Debian's ``chromium``, ``apt-get install -y chromium``)::

    python -m tools.report_screenshot [--out docs]

writes ``report.png`` (the summary, the timeline and the loss curve of the sample in
``report_sample``) and ``report-teardown.png`` (its teardown decision and cost chart). The
browser test (``tests/tools/test_report_in_browser.py``) takes the same screenshots.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from tools import report_sample

INSTALL_HINT = "install it with `apt-get install -y chromium` (Debian; /usr/bin/chromium)"
DEFAULT_OUT = pathlib.Path("docs")  # relative to the repository root, where it is run
SHOTS = {  # image name -> (sample page, window width, window height)
    "report.png": ("run-report.html", 1200, 2000),
    "report-teardown.png": ("teardown-report.html", 1200, 860),
}


class BrowserMissing(RuntimeError):
    """No chromium executable on this machine."""


def find_chromium() -> str | None:
    """The path of ``chromium`` (or ``chromium-browser``) on PATH, None when absent."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(page: pathlib.Path, png: pathlib.Path, width: int, height: int) -> None:
    """Renders ``page`` headless in a ``width`` x ``height`` window (pixels) into ``png``.

    Raises:
        BrowserMissing: chromium is not installed (the message says how to install it).
        RuntimeError: chromium failed or wrote no image (with its output).
    """
    browser = find_chromium()
    if browser is None:
        raise BrowserMissing(f"chromium is not installed: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="vsp-chromium-") as profile:
        command = [
            browser,
            "--headless",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
            page.resolve().as_uri(),
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.insert(1, "--no-sandbox")  # chromium refuses to run as root with it
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 or not png.is_file():
        raise RuntimeError(
            f"chromium exited {done.returncode} without writing {png}: {done.stderr[-2000:]}"
        )


def take(out: pathlib.Path, work: pathlib.Path) -> dict[str, pathlib.Path]:
    """Writes the sample pages into ``work`` and their screenshots into ``out``; returns them."""
    pages = report_sample.write(work)
    out.mkdir(parents=True, exist_ok=True)
    shots = {}
    for name, (page, width, height) in SHOTS.items():
        shots[name] = out / name
        screenshot(pages[page], shots[name], width, height)
    return shots


def main(argv: list[str] | None = None) -> int:
    """The command line: ``--out FOLDER`` (default ``docs/``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT, help="output folder")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vsp-report-sample-") as work:
        try:
            shots = take(args.out, pathlib.Path(work))
        except BrowserMissing as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    for path in shots.values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
