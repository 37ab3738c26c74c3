"""`kvreg serve` in a real browser: Debian's Chromium, headless, driven by Selenium.

Locally these skip without /usr/bin/chromium and /usr/bin/chromedriver; under CI=true they fail
instead (.ci/run installs both). Each test saves screenshots of the pages it visits under its tmp
folder (screens/*.png), to look at when the page changes.
"""

from __future__ import annotations

import json

import pytest
from conftest import Kvreg, registry_state, sqlite_copy
from serving import Server, chromium

WAIT = 60  # seconds: a busy CI machine can take a while to answer

# One pytest-xdist worker runs the whole module (conftest's --dist loadgroup), so its Chromium and its shared
# read-only server (`_chromium`, `_served`: a start each) start once, not once a worker.
pytestmark = pytest.mark.xdist_group("test_serve_browser")


@pytest.fixture
def sqlite_url(sqlite_template, tmp_path):
    """A fresh seeded registry of the test's own (a copy of conftest's sqlite_template)."""
    return sqlite_copy(sqlite_template, tmp_path)


@pytest.fixture(scope="module")
def _served(sqlite_template, tmp_path_factory):
    """One seeded registry and one read-only `kvreg serve` over it for the module's tests that only read
    (a start costs ~1 s of CPU): a read-only server writes nothing (test_read_only_page_has_no_forms holds it
    to that), so every such test sees the seeded registry as a fresh copy would show it. A test that writes
    (test_add_a_plan_through_the_form) starts its own server on its own copy."""
    url = sqlite_copy(sqlite_template, tmp_path_factory.mktemp("served"))
    server = Server(url)
    yield url, server
    server.stop()


@pytest.fixture
def served(_served):
    """(registry URL, its read-only server), shared by the module's tests that only read; the test fails
    if the shared server has died, rather than blaming the next test."""
    url, server = _served
    assert server.proc.poll() is None, f"the shared kvreg serve exited: {server.stop()}"
    yield url, server
    assert server.proc.poll() is None, f"the shared kvreg serve exited during the test: {server.stop()}"


@pytest.fixture(scope="module")
def _chromium(tmp_path_factory):
    """One headless Chromium for the module's tests, on each xdist worker that runs some (a start
    costs seconds). Nothing a page keeps reaches another test: the pages keep no storage and set no
    cookies, the browser fixture leaves each test's page for about:blank and puts the window back as it
    found it, and the tests that share a server (`served`) share a registry that nothing writes."""
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    yield driver
    driver.quit()


@pytest.fixture
def browser(_chromium, tmp_path):
    driver = _chromium
    size = driver.get_window_size()
    driver.shots = tmp_path / "screens"
    driver.shots.mkdir()
    yield driver
    driver.get("about:blank")
    driver.delete_all_cookies()
    driver.set_window_size(size["width"], size["height"])


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


def test_what_if_follows_context_and_gpu(browser, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    sqlite_url, server = served
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


def test_bad_input_shows_the_error(browser, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    sqlite_url, server = served
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


def test_sort_and_filter_a_table(browser, served):
    from selenium.webdriver.common.by import By

    sqlite_url, server = served
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


def test_read_only_page_has_no_forms(browser, served):
    from selenium.webdriver.common.by import By

    sqlite_url, server = served
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

        # An engine's settings: each field shows under the rule that reads it alone (disabled when hidden, so the
        # form never sends one the rule would refuse), and is stored as `plan add --rule vllm
        # --gpu-memory-utilization 0.85` stores it.
        browser.get(server.base + "/plans/new")
        assert not browser.find_element(By.NAME, "gpu-memory-utilization").is_displayed()  # theoretical: none
        fill(name="llama-vllm", model="Llama-3.1-8B", gpu="H100-SXM", rule="sglang", mem_fraction_static="0.8")
        fill(rule="vllm")  # the SGLang field typed into is hidden and not sent
        assert not browser.find_element(By.NAME, "mem-fraction-static").is_displayed()
        assert browser.find_element(By.NAME, "max-num-seqs").is_displayed()  # either engine's
        fill(gpu_memory_utilization="0.85")
        browser.find_element(By.ID, "plan-submit").click()
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "p.ok"), "the vLLM plan's page")
        vllm = {p["plan"]: p for p in kv.json("plan", "list")}["llama-vllm"]
        assert (vllm["rule"], vllm["gpu_memory_utilization"], vllm["mem_fraction_static"]) == ("vllm", 0.85, None)
    finally:
        server.stop()


# --------------------------------------------------------------------------- every page's figures are the CLI's

_GRIDS = """return Array.from(document.querySelectorAll('table.sortable')).map(function (t) {
  var keys = Array.from(t.querySelectorAll('thead th')).map(function (th) { return th.getAttribute('data-key'); });
  return Array.from(t.tBodies[0].rows).map(function (r) {
    var o = {}; Array.from(r.cells).forEach(function (c, i) { o[keys[i]] = c.innerText.trim(); }); return o; });
});"""
YES_NO = ("fits", "tp_valid", "weights_fit", "context_within_claim", "order_late")


def grids(driver) -> list[list[dict]]:
    """Every table on the page as rows of {column key: the text shown}."""
    return driver.execute_script(_GRIDS)


def assert_shows(text: str, value, key: str) -> None:
    """The text a page shows is the CLI's value: equal for text, within the shown decimals for numbers."""
    import re

    where = f"{key}: page shows {text!r}, the CLI prints {value!r}"
    if value is None or value == "":
        assert text == "", where
    elif key in YES_NO:
        assert text == ("yes" if value else "no"), where
    elif isinstance(value, str):
        bare = lambda t: re.sub(r"(?<=\d),(?=\d{3})", "", " ".join(t.split()))  # noqa: E731  (8,192 as 8192)
        assert bare(text) == bare(value), where
    else:
        number = float(text.replace(",", ""))
        if "." in text and "e" not in text:
            decimals = len(text.split(".")[1])
            assert abs(number - value) <= 0.5 * 10 ** -decimals + 1e-9, where
        elif "e" in text:
            assert number == pytest.approx(value, rel=5e-3), where
        else:
            assert number == value, where
        if abs(value) >= 1000:
            assert "," in text, where  # grouped: 131,072, never 131072


def assert_rows(shown: list[dict], cli: list[dict], skip: tuple[str, ...] = ()) -> None:
    assert len(shown) == len(cli) and shown
    for s, c in zip(shown, cli):
        for key, text in s.items():
            if key in skip:
                continue
            assert key in c, f"the page shows a column {key!r} the CLI's JSON does not have"
            assert_shows(text, c[key], key)


def test_every_page_shows_the_figures_the_cli_prints(browser, served):
    sqlite_url, server = served
    kv = Kvreg(sqlite_url)
    # Procurement: what to buy per GPU type and quarter, as `kvreg plan rollup --format json`.
    browser.get(server.base + "/procurement")
    shot(browser, "procurement")
    rollup, by_gpu, totals = grids(browser)
    schedule = kv.json("plan", "rollup")
    cli = schedule["schedule"]
    assert {"gpus_needed", "gpus_installed", "gpus_to_buy", "capex_to_buy", "order_by", "order_late",
            "driving_plans"} <= set(rollup[0])
    assert_rows(rollup, cli)
    # the totals per GPU type and overall, as the CLI's JSON gives them
    assert_rows(by_gpu, [*schedule["totals"], {"gpu": "total", **schedule["total"]}])
    # the totals: each quarter's rows summed by hand from the CLI's JSON
    for t in totals:
        rows = [c for c in cli if c["quarter"] == t["quarter"]]
        for key in ("gpus_needed", "gpus_installed", "gpus_to_buy", "capex_to_buy", "users", "cost_per_month"):
            assert_shows(t[key], sum(c[key] or 0 for c in rows), key)
    assert [t["quarter"] for t in totals] == sorted({c["quarter"] for c in cli})

    # Plans, as `kvreg plan list --format json`.
    browser.get(server.base + "/plans")
    (plans,) = grids(browser)
    assert_rows(plans, kv.json("plan", "list"))

    # A plan's page: its figures and its quarters, as `kvreg plan show --format json`.
    browser.get(server.base + "/plans/chat-llama3-8b")
    shot(browser, "plan-chat")
    show = kv.json("plan", "show", "chat-llama3-8b")
    (quarters,) = grids(browser)
    assert_rows(quarters, [r for r in show if r.get("users") is not None])
    facts = browser.execute_script("return Array.from(document.querySelectorAll('.facts > div')).map("
                                   "function (d) { return [d.querySelector('span').title, d.querySelector('b')"
                                   ".innerText.trim()]; });")
    assert len(facts) >= 10
    for key, text in facts:
        assert_shows(text, show[0][key], key)

    # Models, as `kvreg model list` and, for the KV figures, `kvreg capacity` over every model (bf16, TP 1).
    browser.get(server.base + "/models")
    (models,) = grids(browser)
    listed = kv.json("model", "list")
    kv_rows = {r["model"]: r for r in cli_capacity(sqlite_url, "--context", "128K")}
    assert [m["name"] for m in models] == [m["name"] for m in listed]
    for shown, m in zip(models, listed):
        for key in ("family", "architecture", "layers", "kv_heads", "head_dim", "weight_dtype",
                    "max_position_embeddings"):
            assert_shows(shown[key], m[key], key)
        assert_shows(shown["params_b"], m["params_total"] / 1e9, "params_b")
        assert_shows(shown["kv_bytes_per_token"], kv_rows[m["name"]]["kv_bytes_per_token"], "kv_bytes_per_token")

    # A model's page: the figures at 8K, 32K, 128K, 1m and the claim, as `kvreg model show --format json`.
    browser.get(server.base + "/models/Llama-3.1-8B?gpu=H200")
    (figures,) = grids(browser)
    assert_rows(figures, kv.json("model", "show", "Llama-3.1-8B", "--gpu", "H200")["figures"])

    # What-if: every figure of every card, as `kvreg capacity --format json`.
    browser.get(server.base + "/?model=Qwen3-Next-80B-A3B&gpu=H100-SXM&gpu=H200&context=32K,1M&tp=auto&rule=vllm")
    shot(browser, "whatif-cards")
    cli = cli_capacity(sqlite_url, "--model", "Qwen3-Next-80B-A3B", "--gpu", "H100-SXM", "--gpu", "H200",
                       "--context", "32K,1M", "--tp", "auto", "--rule", "vllm")
    cards = browser.execute_script(
        "return Array.from(document.querySelectorAll('article.card')).map(function (a) { var o = {}; "
        "a.querySelectorAll('[data-figure]').forEach(function (f) { o[f.getAttribute('data-figure')] = "
        "f.firstChild ? f.firstChild.textContent.trim() : ''; }); return o; });")
    assert len(cards) == len(cli) == 4
    for card, row in zip(cards, cli):
        assert len(card) >= 10
        for key, text in card.items():
            assert_shows("" if text == "–" else text, row[key], key)


def test_numbers_are_grouped_on_every_page(browser, served):
    """No count of 1,000 or more shows without its separators, in a table, a card or a sentence."""
    import re

    bare = re.compile(r"(?<![\w.,:/-])\d{4,}(?![\w.,:/]|-\d)")
    sqlite_url, server = served
    pages = ["/?model=Qwen3-Next-80B-A3B&context=1M&rule=vllm&tp=auto", "/?model=Llama-3-8B&context=13000",
             "/models", "/models/Llama-3.1-8B", "/gpus", "/dtypes", "/plans", "/plans/docs-llama3-8b",
             "/procurement"]
    for page in pages:
        browser.get(server.base + page)
        # the question as typed (the command line and the JSON link repeat it) is not a figure
        browser.execute_script("document.querySelectorAll('.repro').forEach(function (e) { e.hidden = true; });")
        text = browser.find_element("tag name", "main").text
        assert not bare.findall(text), (page, [ln for ln in text.splitlines() if bare.search(ln)])
    # the sentence that printed 131072: "fits, beyond the model's 8,192-token claim"
    browser.get(server.base + "/plans")
    assert "fits, beyond the model's 8,192-token claim" in browser.find_element("tag name", "main").text


def test_wide_tables_scroll_with_their_first_column_in_view(browser, served):
    from selenium.webdriver.common.by import By

    sqlite_url, server = served
    browser.set_window_size(900, 900)
    browser.get(server.base + "/plans")
    box = browser.find_element(By.CSS_SELECTOR, ".scroll")
    sizes = browser.execute_script("var s = arguments[0]; return [s.scrollWidth, s.clientWidth, "
                                   "document.documentElement.scrollWidth, document.documentElement.clientWidth];",
                                   box)
    assert sizes[0] > sizes[1]  # the table is wider than its box: it scrolls inside it ...
    assert sizes[2] <= sizes[3]  # ... and the page itself is not cut off on the right
    # scrolled to the far right: the last column is in view, the first (plan names) still is too
    browser.execute_script("arguments[0].scrollLeft = arguments[0].scrollWidth;", box)
    rects = browser.execute_script(
        "var s = arguments[0].getBoundingClientRect(), ths = arguments[0].querySelectorAll('th'),"
        " first = arguments[0].querySelector('tbody td').getBoundingClientRect(),"
        " last = ths[ths.length - 1].getBoundingClientRect();"
        " return [s.left, s.right, first.left, last.right, arguments[0].scrollLeft];", box)
    left, right, first_left, last_right, scrolled = rects
    assert scrolled > 0
    assert abs(first_left - left) <= 1.5 and last_right <= right + 1.5
    assert browser.find_element(By.CSS_SELECTOR, "tbody td").text == "chat-llama3-8b"
    shot(browser, "plans-scrolled")


def test_a_why_not_sentence_reads_on_a_line_or_two(browser, served):
    """The plans table's "why not" column (its last) was squeezed to a word's width, so each sentence stood a word
    a line and made its row five lines tall; it is now at least 22rem wide, so the seeded sentences ("fits, beyond
    the model's 40,960-token claim", 43 characters) take at most two lines."""
    from selenium.webdriver.common.by import By

    sqlite_url, server = served
    browser.set_window_size(1600, 900)
    browser.get(server.base + "/plans")
    cells = browser.find_elements(By.CSS_SELECTOR, "tbody tr td:last-child")
    rem, sized = browser.execute_script(
        "return [parseFloat(getComputedStyle(document.documentElement).fontSize),"
        " Array.from(arguments[0]).filter(function (c) { return c.textContent.trim(); }).map(function (c) {"
        " var text = document.createRange(); text.selectNodeContents(c);"
        " return [c.textContent.trim(), c.getBoundingClientRect().width, text.getBoundingClientRect().height,"
        " parseFloat(getComputedStyle(c).fontSize)]; })];",
        cells)
    assert len(sized) == 3, sized  # docs, qwen3-235b and mixed: beyond their models' claims
    for text, width, height, font in sized:
        assert width >= 22 * rem - 0.5 and height <= 2 * 1.6 * font, (text, width, height, font, rem)


def test_what_if_chart_marks_tp_changes_reaches_the_asked_context_and_the_slider_follows(browser, served):
    from selenium.webdriver.common.by import By

    sqlite_url, server = served
    browser.get(server.base + "/?model=Llama-3.1-8B&context=1M&tp=auto")
    # Llama-3.1-8B claims 128K; asked about 1M the chart goes on to 1M: 2K, 4K, ... 1M = 10 points
    contexts = ",".join(f"{2 ** k}" for k in range(11, 21))
    sweep = cli_capacity(sqlite_url, "--model", "Llama-3.1-8B", "--context", contexts, "--tp", "auto")
    assert [r["context_tokens"] for r in sweep][-1] == 1048576
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#chart circle")) == len(sweep) == 10,
             "the chart to 1M")
    titles = [c.get_attribute("textContent") for c in browser.find_elements(By.CSS_SELECTOR, "#chart circle title")]
    assert titles[-1].startswith("H100-SXM · bf16 at 1M: ") and titles[-1].endswith(f"(TP {sweep[-1]['tp']})")
    # --tp auto switches TP where one sequence no longer fits (TP 1 to 256K, 2 at 512K, 4 at 1M, from the
    # CLI): each switch is marked on the chart and said under it
    switches = [(a["tp"], b["tp"], b["context_tokens"]) for a, b in zip(sweep, sweep[1:]) if a["tp"] != b["tp"]]
    assert switches == [(1, 2, 524288), (2, 4, 1048576)]
    marks = [(int(m.get_attribute("data-from")), int(m.get_attribute("data-to")), int(m.get_attribute("data-context")))
             for m in browser.find_elements(By.CSS_SELECTOR, "#chart g.tp-change")]
    assert marks == switches
    assert browser.find_element(By.ID, "tp-note").text.endswith(
        "H100-SXM · bf16: TP 1 up to 256K, TP 2 from 512K; H100-SXM · bf16: TP 2 up to 512K, TP 4 from 1M.")
    shot(browser, "whatif-1m-tp-auto")
    # the slider reaches 1M (2^20) and follows a context as it is typed, before the field loses focus
    slider = browser.find_element(By.ID, "context-slider")
    assert (slider.get_attribute("max"), slider.get_attribute("value")) == ("20", "20")
    context = browser.find_element(By.ID, "context")
    context.clear()
    context.send_keys("64K")
    wait_for(browser, lambda d: d.find_element(By.ID, "context-slider").get_attribute("value") == "16",
             "the slider at 64K")
    assert browser.find_element(By.ID, "context-slider").get_attribute("max") == "17"  # back to the claim, 128K


def test_what_if_chart_without_a_tp_change_says_nothing_of_it(browser, served):
    from selenium.webdriver.common.by import By

    sqlite_url, server = served
    browser.get(server.base + "/?model=Llama-3.1-8B")
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#chart circle")) == 7, "chart drawn")
    assert not browser.find_elements(By.CSS_SELECTOR, "#chart g.tp-change")
    assert not browser.find_elements(By.ID, "tp-note")
