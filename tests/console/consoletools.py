"""Helpers of the console's tests: the console's command line, its process, headless
Chromium."""
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
NEEDS_CHROMIUM = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="chromium and chromium-driver are not installed "
           "(apt-get install chromium chromium-driver; CI installs them)")


@dataclass
class ConsoleProcess:
    proc: subprocess.Popen
    port: int
    log: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


def console_argv(bootstrap, *args, options=()):
    """`minilog -b BOOTSTRAP [OPTIONS...] console ARGS...`."""
    return [sys.executable, "-m", "minilog.connector.cli", "-b", bootstrap, *options,
            "console", *args]


def headless_chromium():
    from selenium import webdriver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER),
                              options=options)
    driver.set_page_load_timeout(60)
    return driver


def text_of(browser, css, timeout=60):
    """The text of the element CSS selects, waiting for it to appear: a click that submits a
    form returns before the next page is there, and on a busy machine it can take seconds."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait
    return WebDriverWait(browser, timeout).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))).text
