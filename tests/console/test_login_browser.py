"""The console of `minilog cluster up --secure` in a real browser (headless Chromium through
selenium): it holds no credentials of its own; a visitor is sent to the login page, a wrong
password is refused there, the cluster's admin logs in and works, and logging out ends it."""
import json
import re
from pathlib import Path

import pytest
from clitools import kill_left, ok, process_identity, run
from consolehttp import Visitor
from consoletools import NEEDS_CHROMIUM, text_of
from waiting import wait_until

from minilog.connector.secure_cluster import client_settings

pytestmark = [NEEDS_CHROMIUM, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory):
    """(data dir, console URL, console pid) of a one-broker `cluster up --secure`, down and
    every process of it killed afterwards."""
    data = tmp_path_factory.mktemp("secure") / "c"
    up = run("cluster", "up", "--brokers", 1, "--secure", "--data-dir", data, timeout=300)
    state = json.loads((data / "cluster.json").read_text()) \
        if (data / "cluster.json").exists() else {}
    ours = [i for i in (process_identity(p["pid"]) for p in
                        [*state.get("brokers", []), state.get("console") or {}] if p.get("pid"))
            if i]
    try:
        out = up.stdout.decode()
        assert up.returncode == 0, out + up.stderr.decode()
        url = re.search(r"console: (http://\S+)/ ", out).group(1)
        assert "log in as a user of the cluster" in out
        yield data, url, state["console"]["pid"]
    finally:
        run("cluster", "down", "--data-dir", data, timeout=120)
        kill_left(ours)


def test_the_console_of_a_secure_cluster_holds_no_password(secure_cluster):
    data, url, pid = secure_cluster
    password = client_settings(data)["sasl.password"]
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
    assert password not in argv and "client.properties" not in argv  # nor the admin's file
    visitor = Visitor(int(url.rpartition(":")[2]))
    wait_until(lambda: visitor.get("/login").status == 200, 60, "the console to answer")
    assert visitor.get("/topics").status == 303  # nobody logged in: nothing shown


def test_logging_in_and_out_in_a_browser(secure_cluster, browser):
    from selenium.webdriver.common.by import By
    data, url, _ = secure_cluster
    password = client_settings(data)["sasl.password"]
    ok("topics", "create", "audited", "--command-config", data / "client.properties")

    def log_in(user, secret):
        browser.find_element(By.ID, "username").clear()
        browser.find_element(By.ID, "username").send_keys(user)
        browser.find_element(By.ID, "password").send_keys(secret)
        browser.find_element(By.ID, "log-in").click()

    wait_until(lambda: Visitor(int(url.rpartition(":")[2])).get("/login").status == 200, 60,
               "the console to answer")
    browser.get(f"{url}/topics")
    assert browser.current_url.startswith(f"{url}/login?next=")
    log_in("admin", "not-" + password)
    assert text_of(browser, "#error") == "wrong username or password"
    assert "/login" in browser.current_url
    log_in("admin", password)
    wait_until(lambda: browser.current_url == f"{url}/topics", 60, "the page asked for first")
    assert text_of(browser, "#user") == "admin"
    assert "audited" in text_of(browser, "#topics")
    browser.find_element(By.ID, "logout").click()
    wait_until(lambda: browser.current_url.startswith(f"{url}/login"), 60, "the login page")
    browser.get(f"{url}/topics")
    assert browser.current_url.startswith(f"{url}/login?next=")
