"""`kvreg serve` in a real browser: Debian's Chromium, headless, driven by Selenium.

Locally these skip without /usr/bin/chromium and /usr/bin/chromedriver; under CI=true they fail
instead (.ci/run installs both). Each test saves screenshots of the pages it visits under its tmp
folder (screens/*.png), to look at when the page changes.
"""

from __future__ import annotations

import json

import pytest
from conftest import Kvreg, registry_state
from serving import Server, chromium

WAIT = 60  # seconds: a busy CI machine can take a while to answer


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'registry.db'}"


@pytest.fixture
def browser(tmp_path):
    driver = chromium(tmp_path)
    driver.shots = tmp_path / "screens"
    driver.shots.mkdir()
    yield driver
    driver.quit()


def shot(driver, name: str) -> None:
    driver.save_screenshot(str(driver.shots / f"{name}.png"))


def wait_for(driver, condition, message: str):
    """Wait until the condition holds and the what-if form has no question in flight (its answer is
    swapped in once more per question, so elements found earlier would go stale)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def settled(d):
        busy = d.find_elements(By.CSS_SELECTOR, "#whatif[aria-busy]")
        return not busy and condition(d)

    return WebDriverWait(driver, WAIT, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
                         ).until(settled, message)


def card_figure(driver, gpu: str, figure: str):
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, f'article.card[data-gpu="{gpu}"] [data-figure="{figure}"]')
    return found[0] if found else None


def cli_capacity(url: str, *options: str) -> list[dict]:
    return json.loads(Kvreg(url)("capacity", *options, "--format", "json").stdout)


def test_what_if_follows_context_and_gpu(sqlite_url, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    server = Server(sqlite_url)
    try:
        browser.get(server.base + "/?model=Llama-3.1-8B")
        shot(browser, "whatif-start")
        (row,) = cli_capacity(sqlite_url, "--model", "Llama-3.1-8B")
        shown = card_figure(browser, "H100-SXM", "max_concurrency")
        assert shown.text == f"{row['max_concurrency']:,.2f}" == "3.46"
        assert float(shown.get_attribute("data-value")) == row["max_concurrency"]
        # The chart is drawn from the API: one line per GPU, a point per context from 2K to the claim (128K).
        wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#chart circle")) == 7, "chart drawn")

        # Change the context: the answer follows without a page load.
        context = browser.find_element(By.ID, "context")
        context.clear()
        context.send_keys("32K", Keys.TAB)
        wait_for(browser, lambda d: card_figure(d, "H100-SXM", "max_concurrency") is not None and
                 card_figure(d, "H100-SXM", "max_concurrency").text != "3.46", "the answer for 32K")
        (row,) = cli_capacity(sqlite_url, "--model", "Llama-3.1-8B", "--context", "32K")
        shown = card_figure(browser, "H100-SXM", "max_concurrency")
        assert float(shown.get_attribute("data-value")) == row["max_concurrency"]
        assert shown.text == f"{row['max_concurrency']:,.2f}" == "13.85"
        assert card_figure(browser, "H100-SXM", "node_concurrency").text == f"{row['node_concurrency']:,.2f}"
        assert browser.find_element(By.ID, "cli-line").text == \
            "kvreg capacity --model Llama-3.1-8B --gpu H100-SXM --context 32K --format json"
        assert browser.current_url == server.base + "/?model=Llama-3.1-8B&gpu=H100-SXM&context=32K"
        shot(browser, "whatif-32k")

        # Change the GPU: H200 instead of H100-SXM.
        browser.find_element(By.CSS_SELECTOR, 'input[name="gpu"][value="H200"]').click()
        browser.find_element(By.CSS_SELECTOR, 'input[name="gpu"][value="H100-SXM"]').click()
        wait_for(browser, lambda d: card_figure(d, "H200", "max_concurrency") is not None
                 and card_figure(d, "H100-SXM", "max_concurrency") is None, "the answer on H200")
        (row,) = cli_capacity(sqlite_url, "--model", "Llama-3.1-8B", "--context", "32K", "--gpu", "H200")
        shown = card_figure(browser, "H200", "max_concurrency")
        assert float(shown.get_attribute("data-value")) == row["max_concurrency"]
        assert shown.text == f"{row['max_concurrency']:,.2f}" == "27.27"
        # The JSON link is the API, and the API is the CLI's JSON.
        link = browser.find_element(By.ID, "json-link").get_attribute("href")
        assert link == server.base + "/api/capacity?model=Llama-3.1-8B&gpu=H200&context=32K"
        status, _, body = server.get(link[len(server.base):])
        assert status == 200 and body == Kvreg(sqlite_url)(
            "capacity", "--model", "Llama-3.1-8B", "--context", "32K", "--gpu", "H200", "--format", "json").stdout_bytes
        shot(browser, "whatif-h200")

        # TP auto on a model that needs several GPUs: the answer's TP is the CLI's.
        browser.find_element(By.CSS_SELECTOR, 'select[name="model"] option[value="Llama-3.1-70B"]').click()
        browser.find_element(By.CSS_SELECTOR, 'select[name="tp"] option[value="auto"]').click()
        wait_for(browser, lambda d: "Llama-3.1-70B" in d.find_element(By.ID, "cli-line").text
                 and "--tp auto" in d.find_element(By.ID, "cli-line").text, "the 70B at TP auto")
        (row,) = cli_capacity(sqlite_url, "--model", "Llama-3.1-70B", "--context", "32K", "--gpu", "H200",
                              "--tp", "auto")
        wait_for(browser, lambda d: card_figure(d, "H200", "max_concurrency") is not None and float(
            card_figure(d, "H200", "max_concurrency").get_attribute("data-value")) == row["max_concurrency"],
            "the 70B's concurrency")
        assert f"TP {row['tp']}" in browser.find_element(By.CSS_SELECTOR, "article.card header p").text
        shot(browser, "whatif-70b-auto")
    finally:
        server.stop()


def test_bad_input_shows_the_error(sqlite_url, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    server = Server(sqlite_url)
    try:
        browser.get(server.base + "/")
        context = browser.find_element(By.ID, "context")
        context.clear()
        context.send_keys("12Q", Keys.TAB)
        error = wait_for(browser, lambda d: d.find_elements(By.ID, "error"), "an error")[0]
        cli = Kvreg(sqlite_url)("capacity", "--model", "Llama-3.1-8B", "--context", "12Q", ok=False)
        assert error.text == cli.output.strip().removeprefix("Error: ")
        assert error.text.startswith("token count '12Q' is not understood")
        assert not browser.find_elements(By.CSS_SELECTOR, "article.card")
        shot(browser, "whatif-error")
        # Fixing it brings the answer back.
        context.clear()
        context.send_keys("8K", Keys.TAB)
        wait_for(browser, lambda d: card_figure(d, "H100-SXM", "max_concurrency") is not None, "the answer")
        assert not browser.find_elements(By.ID, "error")
    finally:
        server.stop()


def test_sort_and_filter_a_table(sqlite_url, browser):
    from selenium.webdriver.common.by import By

    server = Server(sqlite_url)
    try:
        browser.get(server.base + "/models")

        def names():
            return [r.find_element(By.CSS_SELECTOR, "td").text
                    for r in browser.find_elements(By.CSS_SELECTOR, "tbody tr") if r.is_displayed()]

        assert names()[0] == "ChatGLM3-6B-128K" and len(names()) == 24  # by name, as the registry lists them
        heading = browser.find_element(By.CSS_SELECTOR, 'th[data-key="kv_bytes_per_token"]')
        heading.click()
        assert heading.get_attribute("aria-sort") == "ascending"
        kv = [float(td.get_attribute("data-sort")) for td in browser.find_elements(
            By.CSS_SELECTOR, "tbody tr td:nth-child(11)")]
        assert kv == sorted(kv) and len(kv) == 24
        # Qwen3-Next-80B-A3B: 12 full-attention layers x 2 KV heads x (256 + 256) x 2 B = 24,576 B, the least.
        assert names()[0] == "Qwen3-Next-80B-A3B" and kv[0] == 12 * 2 * (256 + 256) * 2
        shot(browser, "models-sorted")
        heading.click()
        assert heading.get_attribute("aria-sort") == "descending"
        assert names()[-1] == "Qwen3-Next-80B-A3B"
        # Filter: only the Llama rows stay.
        browser.find_element(By.CSS_SELECTOR, "input[data-filter]").send_keys("llama-3.1")
        assert sorted(names()) == ["Llama-3.1-405B", "Llama-3.1-70B", "Llama-3.1-8B"]
        assert browser.find_element(By.CSS_SELECTOR, "[data-count]").text == "3 rows"
        shot(browser, "models-filtered")
        for page in ("gpus", "plans", "procurement", "models/DeepSeek-V3", "plans/chat-llama3-8b"):
            browser.get(f"{server.base}/{page}")
            shot(browser, page.replace("/", "-"))
    finally:
        server.stop()


def test_read_only_page_has_no_forms(sqlite_url, browser):
    from selenium.webdriver.common.by import By

    server = Server(sqlite_url)
    try:
        browser.get(server.base + "/plans")
        assert browser.find_element(By.ID, "mode").text == "read-only"
        assert not browser.find_elements(By.ID, "add-plan")
        assert not browser.find_elements(By.CSS_SELECTOR, 'form[method="post"]')
        browser.get(server.base + "/plans/chat-llama3-8b")
        assert not browser.find_elements(By.ID, "demand-form")
        browser.get(server.base + "/plans/new")
        assert "start it with `kvreg serve --allow-writes`" in browser.find_element(By.CSS_SELECTOR, ".error").text
        shot(browser, "read-only")
        before = registry_state(sqlite_url)
        assert server.post("/plans", {"name": "x", "model": "Llama-3.1-8B", "gpu": "H100-SXM"})[0] == 403
        assert registry_state(sqlite_url) == before
    finally:
        server.stop()


def test_add_a_plan_through_the_form(sqlite_url, browser):
    from selenium.webdriver.common.by import By

    server = Server(sqlite_url, "--allow-writes")
    kv = Kvreg(sqlite_url)
    try:
        browser.get(server.base + "/plans")
        browser.find_element(By.ID, "add-plan").click()

        def fill(**fields):
            for name, value in fields.items():
                el = browser.find_element(By.NAME, name.replace("_", "-"))
                if el.tag_name == "select":
                    el.find_element(By.CSS_SELECTOR, f'option[value="{value}"]').click()
                else:
                    el.clear()
                    el.send_keys(value)

        # Bad input first: the CLI's message, the form kept, nothing written.
        before = registry_state(sqlite_url)
        fill(name="qwen-long", model="Qwen3-8B", gpu="H200", context="128K", tp="3")
        browser.find_element(By.ID, "plan-submit").click()
        error = wait_for(browser, lambda d: d.find_elements(By.ID, "form-error"), "the form's error")[0]
        cli = kv("plan", "add", "qwen-long", "--model", "Qwen3-8B", "--gpu", "H200", "--context", "128K", "--tp", "3",
                 ok=False)
        assert error.text == cli.output.strip().removeprefix("Error: ")
        assert browser.find_element(By.NAME, "name").get_attribute("value") == "qwen-long"
        assert registry_state(sqlite_url) == before
        shot(browser, "plan-form-error")

        fill(tp="auto", avg_tokens="16K")
        browser.find_element(By.ID, "plan-submit").click()
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "p.ok"), "the plan page")
        assert browser.current_url == server.base + "/plans/qwen-long?done=added"
        shot(browser, "plan-added")
        plans = {p["plan"]: p for p in kv.json("plan", "list")}
        added = plans["qwen-long"]
        assert (added["model"], added["gpu"], added["context_tokens"], added["avg_tokens"]) == \
            ("Qwen3-8B", "H200", 131072, 16384)
        # TP auto was resolved as `kvreg capacity --tp auto` resolves it.
        (row,) = cli_capacity(sqlite_url, "--model", "Qwen3-8B", "--gpu", "H200", "--tp", "auto")
        assert added["tp"] == row["tp"]

        # Set demand on the plan's page.
        browser.find_element(By.NAME, "quarter").send_keys("2027Q1")
        browser.find_element(By.NAME, "users").send_keys("120")
        browser.find_element(By.CSS_SELECTOR, "#demand-form button").click()
        wait_for(browser, lambda d: "done=demand" in d.current_url, "demand saved")
        (d,) = kv.json("demand", "list", "--plan", "qwen-long")
        assert (d["quarter"], d["users"]) == ("2027Q1", 120)
        assert "2027Q1" in browser.find_element(By.CSS_SELECTOR, "table.sortable").text
        shot(browser, "plan-demand")
    finally:
        server.stop()
