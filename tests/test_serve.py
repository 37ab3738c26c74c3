"""`kvreg serve` over HTTP, on SQLite and PostgreSQL: the API is the CLI's JSON byte for byte, pages
read the registry, writes are opt-in, CSRF-protected and all-or-nothing, no password is shown."""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

import pytest
from conftest import Kvreg, registry_state
from serving import Server

# Option sets of `kvreg capacity`: as query items, and as the same options on the command line.
QUESTIONS = [
    [("model", "Llama-3.1-8B"), ("gpu", "H100-SXM"), ("context", "128K")],
    # lists: repeated and comma-separated names, several contexts and KV dtypes
    [("model", "Llama-3.1-8B,Qwen3-8B"), ("gpu", "H100-SXM"), ("gpu", "H200"), ("context", "8K,128K,1m"),
     ("kv-dtype", "bf16,fp8")],
    # --tp auto: the smallest TP in the node that holds one sequence
    [("model", "Llama-3.1-70B,Qwen3-235B-A22B"), ("tp", "auto"), ("context", "128K")],
    # an engine rule and its settings, a model that does not fit
    [("model", "DeepSeek-V3"), ("gpu", "H100-SXM"), ("tp", "8"), ("rule", "vllm"),
     ("gpu-memory-utilization", "0.9"), ("context", "32K")],
    # seed 002's pool given directly, one GPU per node, weights in fp8
    [("model", "Llama-3-8B"), ("gpus-per-node", "1"), ("kv-cache-memory", "53GB"), ("context", "2K,8K"),
     ("weight-dtype", "fp8"), ("block-size", "16")],
]


def _argv(items) -> list[str]:
    return [w for k, v in items for w in (f"--{k}", v)]


@pytest.fixture(scope="module")
def server(module_db_url):
    s = Server(module_db_url)
    yield s
    s.stop()


@pytest.mark.parametrize("items", QUESTIONS, ids=["one", "lists", "tp-auto", "vllm", "kv-cache-memory"])
def test_api_capacity_is_the_cli_json_byte_for_byte(server, module_db_url, items):
    status, headers, body = server.get("/api/capacity?" + urlencode(items))
    cli = Kvreg(module_db_url)("capacity", *_argv(items), "--format", "json").stdout_bytes
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    assert body == cli
    assert re.fullmatch(r"app;dur=\d+\.\d\d", headers["server-timing"])


def test_api_figures_worked_by_hand(server):
    _, _, body = server.get("/api/capacity?model=Llama-3.1-8B&gpu=H100-SXM&context=128K")
    (row,) = json.loads(body)
    # 32 layers x 8 KV heads x (128 + 128) x 2 bytes = 131,072 B per token; x 131,072 tokens = 16 GiB.
    assert row["kv_bytes_per_token_per_gpu"] == 32 * 8 * (128 + 128) * 2 == 131072
    assert row["kv_gib_per_sequence_per_gpu"] == 16.0
    # pool = 80 GiB x (1 - 0.12) - 8.05e9 params x 2 B; max concurrency = pool / 16 GiB.
    pool = 80 * 2**30 * 0.88 - 8.05e9 * 2
    assert row["max_concurrency"] == pytest.approx(pool / (16 * 2**30), rel=1e-12)
    assert round(row["max_concurrency"], 4) == 3.4629
    assert row["node_concurrency"] == pytest.approx(8 * pool / (16 * 2**30), rel=1e-12)


@pytest.mark.parametrize("query, flags", [
    ("context=12Q", ["--context", "12Q"]),
    ("model=Llama-3.1-8B&tp=3", ["--model", "Llama-3.1-8B", "--tp", "3"]),
    ("model=Llama-3.1-9B", ["--model", "Llama-3.1-9B"]),
    ("pp=two", ["--pp", "two"]),
])
def test_api_errors_are_the_cli_error_line(server, module_db_url, query, flags):
    status, _, body = server.get("/api/capacity?" + query)
    result = Kvreg(module_db_url)("capacity", *flags, ok=False)
    assert status == 400 and result.exit_code != 0
    message = result.output.strip().splitlines()[-1].removeprefix("Error: ")
    cli_message = re.sub(r" \(see `\S+ capacity --help`\)$", "", message)
    assert json.loads(body) == {"error": cli_message}


def test_api_refuses_options_the_cli_does_not_have(server):
    status, _, body = server.get("/api/capacity?model=Llama-3.1-8B&format=csv")
    assert status == 400
    assert json.loads(body)["error"].startswith("unknown option 'format': use one of activation-memory, block-size,")
    status, _, body = server.get("/api/capacity?help=1")
    assert status == 400 and "unknown option 'help'" in json.loads(body)["error"]


def test_pages_show_the_registry(server):
    status, _, body = server.get("/models")
    html = body.decode()
    assert status == 200
    # 24 catalog models, each a row linking to its page; Llama-3.1-8B's bf16 KV per token.
    assert html.count('<a href="/models/') == 24
    row = re.search(r'<tr><td data-sort="Llama-3.1-8B">.*?</tr>', html).group(0)
    assert '<td data-sort="131072.0" class="num">131,072</td>' in row or '<td data-sort="131072" class="num">131,072</td>' in row
    status, _, body = server.get("/models/Qwen3-Next-80B-A3B")
    html = body.decode()
    assert status == 200 and "Qwen__Qwen3-Next-80B-A3B-Thinking.json" in html
    # the figures at 8K, 32K, 128K, 1m and the claim (262,144): five rows
    assert html.count("<tr><td") == 5 and ">262,144<" in html
    status, _, body = server.get("/plans/chat-llama3-8b")
    html = body.decode()
    # seed 002's chat plan: 2026Q3 100 users and 2026Q4 250 users, one GPU each
    assert status == 200 and 'data-sort="2026Q3"' in html and 'data-sort="2026Q4"' in html
    assert server.get("/procurement")[0] == 200
    assert server.get("/gpus")[0] == 200 and server.get("/dtypes")[0] == 200
    assert server.get("/plans/no-such-plan")[0] == 404
    assert server.get("/models/No-Such")[0] == 404


def test_the_what_if_page_answers_without_script(server):
    status, _, body = server.get("/?model=Llama-3.1-8B&gpu=H200&context=32K")
    html = body.decode()
    assert status == 200
    # H200 141 GiB: pool = 141 x 0.88 GiB - 16.1e9 B; a 32K sequence is 4 GiB.
    value = (141 * 2**30 * 0.88 - 8.05e9 * 2) / (4 * 2**30)
    shown = re.search(r'data-figure="max_concurrency" data-value="([^"]+)">([^<]+)<', html)
    assert float(shown.group(1)) == pytest.approx(value, rel=1e-12)
    assert shown.group(2) == f"{value:,.2f}" == "27.27"
    assert "kvreg capacity --model Llama-3.1-8B --gpu H200 --context 32K --format json" in html
    assert 'href="/api/capacity?model=Llama-3.1-8B&amp;gpu=H200&amp;context=32K"' in html
    # each field's placeholder is the CLI option's default, else its input's declared default (the reserve's 0.12),
    # blank where neither has one (click's UNSET never shows)
    assert '<input name="context" id="context" value="32K" placeholder="128K"' in html
    assert '<input name="max-num-seqs" value="" placeholder=""' in html
    assert '<input name="reserve" value="" placeholder="0.12"' in html
    assert "UNSET" not in html
    # the settings read under one rule alone: the reserve, then the engine row, every engine setting in declaration
    # order, each shown under the rules that read it
    engine = re.findall(r'<label data-rule="([^"]+)">([^\n<]+)\n\s*<input name="([^"]+)"', html)
    assert [(rule, name) for rule, _label, name in engine] == [("theoretical", "reserve"),
        ("vllm", "gpu-memory-utilization"), ("vllm", "max-num-batched-tokens"), ("vllm", "max-concurrent-batches"),
        ("vllm sglang", "max-num-seqs"), ("vllm", "activation-memory"), ("vllm", "cuda-graph-memory"),
        ("sglang", "mem-fraction-static"), ("vllm sglang", "engine-version"), ("vllm sglang", "non-torch-memory"),
        ("vllm sglang", "weights-memory"), ("vllm", "sampler")]
    # an engine rule's answer says what caps it: Llama-3.1-8B's 53 GiB pool holds 6,784 64-token requests, vLLM
    # runs 1,024 (tests/test_engine_rules.py test_the_engines_cap_on_running_requests)
    html = server.get("/?model=Llama-3.1-8B&gpu=H100-SXM&gpus-per-node=1&context=64&rule=vllm"
                      "&kv-cache-memory=53GiB")[2].decode()
    assert '<dd data-figure="sequences_per_rank" data-value="6784.0">6,784</dd>' in html
    assert '<dd data-figure="max_running_requests" data-value="1024">1,024 <small>requests</small></dd>' in html


def test_the_plan_form_is_plan_adds_options_as_declared(module_db_url):
    """The plan form's fields are options of `kvreg plan add` (the names spec_from_options reads); an input's field
    takes its label, tooltip and placeholder (what it takes left empty) from its declaration, as the what-if page's
    do. The page writes the label of what is not an input: the plan's name, model, GPU, weight dtype, mix and notes."""
    import anyio
    import httpx

    from kvreg.app.options import PLAN_ADD, option_names
    from kvreg.web.app import create_app

    async def page():
        transport = httpx.ASGITransport(app=create_app(module_db_url, allow_writes=True))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return (await client.get("/plans/new")).text

    html = anyio.run(page)
    names = re.findall(r'<(?:input|select) name="([^"]+)"', html)
    assert names[0] == "name" and set(names[1:]) <= set(option_names(PLAN_ADD))  # the name: an argument
    fields = re.findall(r'<label(?: data-rule="[^"]+")?>([^\n<]+)\n\s*<input name="([^"]+)" value="" placeholder="([^"]*)"',
                        html)
    assert fields == [("Context", "context", "128K"), ("GPUs per node", "gpus-per-node", "8"), ("TP", "tp", "1"),
                      ("PP", "pp", "1"), ("DP attention", "dp-attention", "1"), ("Block size", "block-size", "16"),
                      ("Average tokens", "avg-tokens", ""), ("Input tokens", "input-tokens", ""),
                      ("Output tokens", "output-tokens", ""), ("TPOT target (ms)", "tpot-ms", ""),
                      ("TTFT target (ms)", "ttft-ms", ""), ("Reserve", "reserve", "0.12"),
                      ("KV pool per GPU", "kv-cache-memory", ""),
                      # the engines' settings, each under the rules that read it (data-rule), empty: the default
                      ("GPU memory utilization", "gpu-memory-utilization", ""),
                      ("max num batched tokens", "max-num-batched-tokens", ""),
                      ("max concurrent batches", "max-concurrent-batches", ""),
                      ("max running requests", "max-num-seqs", ""), ("activation memory", "activation-memory", ""),
                      ("CUDA graph memory", "cuda-graph-memory", ""), ("mem fraction static", "mem-fraction-static", ""),
                      ("engine version", "engine-version", ""), ("non-torch memory", "non-torch-memory", ""),
                      ("weights memory", "weights-memory", ""), ("sampler", "sampler", "")]
    assert '<label data-rule="sglang">mem fraction static' in html and '<label data-rule="vllm">sampler' in html
    assert 'title="a number of GPUs, or auto"' in html
    choices = re.findall(r'<label>([^\n<]+)\n\s*<select name="([^"]+)" data-default="([^"]*)"', html)
    assert choices == [("KV dtype", "kv-dtype", "bf16"), ("Rule", "rule", "theoretical")]
    assert '<option value="bf16" selected>' in html and '<option value="theoretical" selected>' in html


def test_the_chart_with_request_lengths_starts_at_the_first_context_that_holds_them(server):
    """8k + 1k = 8,000 + 1,000 = 9,000 tokens a request: the chart's question asks no context shorter than that
    (2K, 4K and 8K would be refused as too short for the requests), but 9,000 itself and 16K up to the model's
    131,072-token claim; its API call answers, as the CLI would."""
    from html import unescape
    from urllib.parse import parse_qsl

    html = server.get("/?model=Llama-3.1-8B&gpu=H100-SXM&input-tokens=8k&output-tokens=1k")[2].decode()
    sweep = unescape(re.search(r'data-sweep="(/api/capacity\?[^"]+)"', html).group(1))
    assert dict(parse_qsl(sweep.split("?", 1)[1]))["context"] == "9000,16384,32768,65536,131072"
    status, _, body = server.get(sweep)
    assert status == 200, body
    assert [r["context_tokens"] for r in json.loads(body)] == [9000, 16384, 32768, 65536, 131072]


def test_report_and_workbook_download(server):
    status, headers, body = server.get("/report/2026Q4/capacity.md")
    assert status == 200 and body.startswith(b"# ") and b"2026Q4" in body[:400]
    assert headers["content-disposition"] == 'attachment; filename="kvreg-2026-Q4-capacity.md"'
    status, headers, body = server.get("/report/2026Q4/capacity.xlsx")
    assert status == 200 and body[:2] == b"PK"
    assert server.get("/report/2026Q9/capacity.md")[0] == 404


def test_read_only_by_default(server, module_db_url):
    before = registry_state(module_db_url)
    for path in ("/", "/plans", "/plans/chat-llama3-8b"):
        html = server.get(path)[2].decode()
        assert 'method="post"' not in html and "csrf_token" not in html
    assert server.get("/plans/new")[0] == 403
    status, _, body = server.post("/plans", {"name": "sneaky", "model": "Llama-3.1-8B"})
    assert status == 403 and b"start it with `kvreg serve --allow-writes`" in body
    assert server.post("/plans/chat-llama3-8b/demand", {"quarter": "2027Q1", "users": "5"})[0] == 403
    assert server.request("PUT", "/plans")[0] == 405
    assert registry_state(module_db_url) == before


def test_only_names_of_this_machine_are_served(server):
    # A page elsewhere that rebinds its own name to 127.0.0.1 is refused (DNS rebinding).
    assert server.get("/api/capacity", headers={"Host": "attacker.example"})[0] == 400
    assert server.get("/", headers={"Host": f"localhost:{server.port}"})[0] == 200


def test_writes_add_a_plan_and_set_demand(db_url, state):
    kv = Kvreg(db_url)
    s = Server(db_url, "--allow-writes")
    try:
        assert "writes allowed" in "".join(s.banner)
        token = s.csrf_token()
        form = {"csrf_token": token, "name": "web-chat", "model": "Llama-3.1-8B", "gpu": "H100-SXM",
                "context": "8K", "tp": "", "kv-dtype": "bf16", "weight-dtype": "native", "avg-tokens": "1500",
                "rule": "theoretical", "notes": "<b>from the page</b>"}
        # Without the token, or from another site: refused, nothing written.
        before = state()
        assert s.post("/plans", {**form, "csrf_token": "forged"})[0] == 403
        assert s.post("/plans", form, headers={"Origin": "http://attacker.example"})[0] == 403
        assert state() == before
        status, headers, _ = s.post("/plans", form, headers={"Origin": s.base})
        assert status == 303 and headers["location"] == "/plans/web-chat?done=added"
        plans = {p["plan"]: p for p in kv.json("plan", "list")}
        cli_plan = {p["plan"]: p for p in json.loads(_cli_plan_add(db_url))}["cli-chat"]
        added = plans["web-chat"]
        # The same plan as `kvreg plan add` with the same options: every figure equal.
        assert {k: v for k, v in added.items() if k not in ("plan_id", "plan", "notes")} == \
               {k: v for k, v in cli_plan.items() if k not in ("plan_id", "plan", "notes")}
        assert added["notes"] == "<b>from the page</b>"
        html = s.get("/plans/web-chat")[2].decode()
        assert "&lt;b&gt;from the page&lt;/b&gt;" in html and "<b>from the page" not in html

        # Bad input: the CLI's message, status 400, nothing written.
        before = state()
        status, _, body = s.post("/plans", {**form, "name": "web-bad", "tp": "3"})
        cli = kv("plan", "add", "web-bad", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--context", "8K",
                 "--tp", "3", ok=False)
        assert status == 400
        assert _alert(body) == cli.output.strip().removeprefix("Error: ")
        status, _, body = s.post("/plans", {**form, "name": "web-chat"})
        assert status == 400 and "already exists" in _alert(body)
        status, _, body = s.post("/plans", {**form, "name": "web-bad", "workload": "chat=1500:0.8,docs=oops"})
        assert status == 400 and _alert(body) == ("--workload 'docs=oops' is not understood: write "
                                                  "CLASS=TOKENS:SHARE, such as chat=1500:0.8")
        assert state() == before

        status, headers, _ = s.post("/plans/web-chat/demand", {"csrf_token": token, "quarter": "2027Q1",
                                                               "users": "400"})
        assert status == 303
        (d,) = kv.json("demand", "list", "--plan", "web-chat")
        assert (d["quarter"], d["users"]) == ("2027Q1", 400)
        before = state()
        status, _, body = s.post("/plans/web-chat/demand", {"csrf_token": token, "quarter": "2027Q5", "users": "4"})
        assert status == 400 and "2027Q5" in _alert(body)
        status, _, body = s.post("/plans/web-chat/demand", {"csrf_token": token, "quarter": "2027Q2", "users": "-1"})
        assert status == 400
        assert state() == before
    finally:
        s.stop()


def _cli_plan_add(url: str) -> str:
    kv = Kvreg(url)
    kv("plan", "add", "cli-chat", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--context", "8K",
       "--avg-tokens", "1500")
    return kv("plan", "list", "--format", "json").stdout


def _alert(body: bytes) -> str:
    import html

    return html.unescape(re.search(rb'role="alert"[^>]*>([^<]*)<', body).group(1).decode())


def test_start_message_and_no_password_anywhere(pg_url, tmp_path):
    from sqlalchemy.engine import make_url

    # The test server trusts loopback logins, so a password in the URL is accepted and ignored.
    url = make_url(pg_url).set(password="s3cret-Pw").render_as_string(hide_password=False)
    s = Server(url)
    try:
        pages = [s.get(p)[2] for p in ("/", "/models", "/plans", "/procurement", "/nowhere")]
    finally:
        out = s.stop()
    assert out.splitlines()[0] == (f"kvreg serve: http://127.0.0.1:{s.port}/ (listening on 127.0.0.1: only this "
                                   "machine can reach it)")
    assert "read-only (--allow-writes adds the plan and demand forms)" in out
    assert "s3cret" not in out and all(b"s3cret" not in p for p in pages)
    assert b":***@" in pages[0]


def test_port_in_use_is_one_line(db_url):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = Kvreg(db_url)("serve", "--port", port, ok=False)
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: cannot listen on 127.0.0.1:{port}: ")
    assert result.output.rstrip().endswith("choose another with --port") and result.output.count("\n") == 1


# --------------------------------------------------------------------------- the procurement page


def _grid(html: str, which: int = 0) -> list[dict]:
    """The rows of the page's `which`-th table as {column key: cell text}."""
    import html as h

    table = re.findall(r"<table class=\"sortable\">.*?</table>", html, re.S)[which]
    keys = re.findall(r'<th data-key="([^"]+)"', table)
    rows = []
    for tr in re.findall(r"<tr><td.*?</tr>", table, re.S):
        cells = [h.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        rows.append(dict(zip(keys, cells, strict=True)))
    return rows


def test_procurement_page_shows_what_to_buy_as_the_cli_rollup(server, module_db_url):
    cli = Kvreg(module_db_url).json("plan", "rollup", "--from", "2026Q4")
    html = server.get("/procurement?from=2026Q4")[2].decode()
    rows = _grid(html)
    # every schedule row, with what to buy, never an empty cell where the rollup has a value
    assert [(r["gpu"], r["quarter"]) for r in rows] == [(c["gpu"], c["quarter"]) for c in cli["schedule"]]
    for shown, c in zip(rows, cli["schedule"]):
        for key in ("gpus_needed", "gpus_installed", "gpus_to_buy", "gpus_bought", "gpus_spare", "plans", "users",
                    "nodes_needed", "previous_quarter_gpus_needed", "gpus_needed_quarter_change"):
            assert shown[key] == f"{c[key]:,}", key
        for key in ("capex_to_buy", "cost_per_month"):
            assert shown[key] == f"{c[key]:,.2f}", key
        assert (shown["order_by"], shown["driving_plans"]) == (c["order_by"] or "", c["driving_plans"])
        assert shown["order_late"] == ("yes" if c["order_late"] else "no")
    # Seed 002's H100-SXM: 39 GPUs needed in 2026Q3, 93 in 2026Q4, none installed. The horizon starts at
    # 2026Q4 (what 2026Q3 needed was bought then, or is short and belongs in the fleet): 93 to buy in
    # 2026Q4 at 30,000 USD = 2,790,000 USD, then nothing (demand carried forward).
    h100 = {r["quarter"]: r for r in rows if r["gpu"] == "H100-SXM"}
    assert [h100[q]["gpus_to_buy"] for q in ("2026Q4", "2027Q1", "2027Q2", "2027Q3")] == ["93", "0", "0", "0"]
    assert h100["2026Q4"]["capex_to_buy"] == f"{93 * 30000:,.2f}" == "2,790,000.00"
    assert h100["2026Q4"]["order_by"] == "2026Q4" and h100["2026Q4"]["order_late"] == "no"
    assert h100["2026Q4"]["driving_plans"].startswith("longctx-qwen3-235b +64, longctx-llama31-70b +24")
    # totals per GPU type and overall: H100-SXM 93, H200 3 (35,000 USD each)
    by_gpu = {r["gpu"]: r for r in _grid(html, 1)}
    assert (by_gpu["H100-SXM"]["gpus_to_buy"], by_gpu["H200"]["gpus_to_buy"], by_gpu["total"]["gpus_to_buy"]) == (
        "93", "3", "96")
    assert by_gpu["total"]["capex_to_buy"] == f"{93 * 30000 + 3 * 35000:,.2f}" == "2,895,000.00"
    assert by_gpu["total"]["capex_to_buy"] == f"{cli['total']['capex_to_buy']:,.2f}"
    # totals per quarter: 2026Q4 = 93 + 3 GPUs
    totals = {r["quarter"]: r for r in _grid(html, 2)}
    assert totals["2026Q4"]["gpus_to_buy"] == "96" and totals["2027Q1"]["gpus_to_buy"] == "0"
    # no GPU type has a lead time: every order is placed in the quarter it lands, none late
    assert 'id="late"' not in html


def test_procurement_page_flags_late_orders_and_refuses_a_bad_quarter(db_url):
    from kvreg.web.app import create_app

    kv = Kvreg(db_url)
    kv("gpu", "set", "H100-SXM", "--lead-time", 2)
    page = _InProcess(create_app(db_url))
    html = page.get("/procurement?from=2026Q4").text
    # 2026Q4's 93 H100s had to be ordered 2 quarters earlier, in 2026Q2: before the horizon, late.
    h100 = next(r for r in _grid(html) if (r["gpu"], r["quarter"]) == ("H100-SXM", "2026Q4"))
    assert (h100["order_by"], h100["order_late"]) == ("2026Q2", "yes")
    assert "1 order is late: H100-SXM for 2026Q4 (order by 2026Q2)" in html
    assert {r["gpu"]: r["orders_late"] for r in _grid(html, 1)} == {"H100-SXM": "1", "H200": "0", "total": "1"}
    bad = page.get("/procurement?from=2026Q5")
    assert bad.status_code == 404 and "2026Q5" in bad.text


class _InProcess:
    """The ASGI application called in this process (so a test can patch what it calls), over httpx."""

    def __init__(self, app):
        self.app = app

    def request(self, method: str, path: str, **kwargs):
        import anyio
        import httpx

        async def go():
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                return await client.request(method, path, **kwargs)

        return anyio.run(go)

    def get(self, path: str):
        return self.request("GET", path)


def test_a_column_the_rollup_lost_is_a_server_error_not_an_empty_cell(module_db_url, monkeypatch):
    import kvreg.db.read
    from kvreg.web.app import MissingColumn, create_app

    sched = Kvreg(module_db_url).json("plan", "rollup", "--from", "2026Q4")
    renamed = [{("capex" if k == "capex_to_buy" else k): v for k, v in r.items()} for r in sched["schedule"]]
    monkeypatch.setattr(kvreg.db.read, "purchase_schedule", lambda conn, **k: {**sched, "schedule": renamed})
    with pytest.raises(MissingColumn, match=r"the rows have no column 'capex_to_buy'"):
        _InProcess(create_app(module_db_url)).get("/procurement")
    # what the schedule gives is what the page shows: an order_by of 2026Q2 reads 2026Q2
    scheduled = [{**r, "order_by": "2026Q2"} for r in renamed]
    for r in scheduled:
        r["capex_to_buy"] = r.pop("capex")
    monkeypatch.setattr(kvreg.db.read, "purchase_schedule", lambda conn, **k: {**sched, "schedule": scheduled})
    rows = _grid(_InProcess(create_app(module_db_url)).get("/procurement").text)
    assert [r["order_by"] for r in rows] == ["2026Q2"] * len(scheduled)


def test_the_report_download_holds_its_charts(server):
    import io
    import zipfile

    status, headers, body = server.get("/report/2026Q4/report.zip")
    assert status == 200 and headers["content-type"] == "application/zip"
    assert headers["content-disposition"] == 'attachment; filename="kvreg-2026-Q4-report.zip"'
    z = zipfile.ZipFile(io.BytesIO(body))
    md = z.read("2026-Q4/capacity.md").decode()
    charts = re.findall(r"!\[[^\]]*\]\((charts/[^)]+\.png)\)", md)
    assert len(charts) >= 2
    for chart in charts:
        assert z.read(f"2026-Q4/{chart}")[:8] == b"\x89PNG\r\n\x1a\n", chart
    assert b'href="/report/' in server.get("/procurement")[2] and b"report.zip" in server.get("/procurement")[2]


# --------------------------------------------------------------------------- hostile cases (docs/reliability.md)


def test_every_post_to_a_read_only_server_is_403(server, module_db_url):
    before = registry_state(module_db_url)
    for path in ("/api/capacity", "/models", "/", "/procurement", "/plans/chat-llama3-8b", "/nowhere"):
        status, _, body = server.post(path, {"x": "1"})
        assert status == 403, path
        assert b"start it with `kvreg serve --allow-writes`" in body
    assert server.request("DELETE", "/plans/chat-llama3-8b")[0] == 405
    assert registry_state(module_db_url) == before


def test_no_page_can_be_framed(server):
    for path in ("/", "/plans", "/api/capacity", "/nowhere", "/static/kvreg.css"):
        _, headers, _ = server.get(path)
        assert headers["x-frame-options"] == "DENY", path
        assert headers["content-security-policy"] == "frame-ancestors 'none'", path
    _, headers, _ = server.post("/plans", {})
    assert headers["x-frame-options"] == "DENY"


def test_a_loopback_address_other_than_127_0_0_1_keeps_the_host_check(module_db_url):
    s = Server(module_db_url, host="127.0.0.2")
    try:
        assert s.banner[0] == (f"kvreg serve: http://127.0.0.2:{s.port}/ (listening on 127.0.0.2: only this "
                               "machine can reach it)\n")
        assert s.get("/api/capacity?model=Llama-3.1-8B")[0] == 200
        assert s.get("/api/capacity", headers={"Host": "attacker.example"})[0] == 400
    finally:
        s.stop()


def test_too_large_a_question_is_refused_with_its_size(server):
    import time

    names = ["A100-40GB", "A100-80GB", "B200", "H100-SXM", "H200", "L40S", "M3-Ultra", "MI300X", "RTX-4090",
             "RTX-5090"]  # the catalog's 10 GPUs
    query = urlencode([("gpu", ",".join(names)), ("context", ",".join(str(1000 + i) for i in range(1000)))])
    start = time.monotonic()
    status, _, body = server.get("/api/capacity?" + query)
    took = time.monotonic() - start
    assert status == 400
    # 24 models (none named: every one) x 10 GPUs x 1,000 contexts x 1 KV dtype
    assert json.loads(body) == {"error": "this question has 240,000 scenarios (24 models x 10 GPUs x 1,000 contexts x "
                                         "1 KV dtype); the web server answers at most 2,400 at a time: ask for "
                                         "fewer, or run the same `kvreg capacity` command, which has no limit"}
    assert len(body) < 400 and took < 30
    status, _, body = server.get("/whatif/answer?" + query)
    assert status == 400 and b"240,000 scenarios" in body
    # 24 x 10 x 10 = 2,400 is answered
    ten = urlencode([("gpu", ",".join(names)), ("context", ",".join(str(1000 + i) for i in range(10)))])
    status, _, body = server.get("/api/capacity?" + ten)
    assert status == 200 and len(json.loads(body)) == 2400


def test_parallel_workbook_downloads_all_succeed(server):
    """40 downloads at once from 127.0.0.1 (bounded: 40 requests, 120 s each): every one 200 and a whole workbook."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(lambda _: server.get("/report/2026Q4/capacity.xlsx"), range(40)))
    assert [a[0] for a in answers] == [200] * 40
    import io
    import zipfile

    for _, _, body in answers:
        assert zipfile.ZipFile(io.BytesIO(body)).testzip() is None


def test_a_plan_named_with_a_slash_has_a_page(db_url):
    kv = Kvreg(db_url)
    kv("plan", "add", "team/chat", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--context", "8K")
    s = Server(db_url, "--allow-writes")
    try:
        html = s.get("/plans")[2].decode()
        assert '<a href="/plans/team%2Fchat">team/chat</a>' in html
        status, _, body = s.get("/plans/team%2Fchat")
        assert status == 200 and b"<h1>Plan team/chat</h1>" in body
        assert b'action="/plans/team%2Fchat/demand"' in body
        status, headers, _ = s.post("/plans/team%2Fchat/demand", {"csrf_token": s.csrf_token(), "quarter": "2027Q1",
                                                                  "users": "40"})
        assert status == 303 and headers["location"] == "/plans/team%2Fchat?done=demand"
        (d,) = kv.json("demand", "list", "--plan", "team/chat")
        assert (d["quarter"], d["users"]) == ("2027Q1", 40)
    finally:
        s.stop()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_write_after_the_registry_file_went_away_is_refused(tmp_path, how):
    import os
    import shutil

    path = tmp_path / "registry.db"
    url = f"sqlite:///{path}"
    Kvreg(url)("plan", "list")
    s = Server(url, "--allow-writes")
    try:
        token = s.csrf_token()
        assert s.get("/plans")[0] == 200  # the registry opened the full way, its connections pooled
        if how == "deleted":
            os.unlink(path)
        else:
            shutil.copy(path, tmp_path / "other.db")
            os.replace(tmp_path / "other.db", path)
        before = registry_state(url) if how == "replaced" else None
        status, _, body = s.post("/plans/chat-llama3-8b/demand", {"csrf_token": token, "quarter": "2027Q1",
                                                                  "users": "40"})
        assert status == 503
        what = "deleted" if how == "deleted" else "replaced by another file"
        assert _alert(body) == (f"the registry {path} was {what} after kvreg serve opened it; nothing was read or "
                                "written: restart kvreg serve to serve the file now at that path")
        assert s.get("/plans")[0] == 503
        if how == "replaced":
            assert registry_state(url) == before
            assert Kvreg(url).json("demand", "list", "--plan", "chat-llama3-8b")[-1]["quarter"] != "2027Q1"
        else:
            assert not path.exists()
    finally:
        out = s.stop()
    assert "Traceback" not in out


def test_a_registry_replaced_during_a_write_rolls_the_write_back(tmp_path, monkeypatch):
    """The file is swapped after the request's check and while the write runs: the check inside the
    transaction, before the commit, rolls it back (the old file, kept by a second link, has no new row)."""
    import os
    import shutil

    import kvreg.app.plans
    from kvreg.web.app import create_app

    path = tmp_path / "registry.db"
    url = f"sqlite:///{path}"
    Kvreg(url)("plan", "list")
    original = kvreg.app.plans.set_demand

    def set_demand_then_swap(conn, *args):
        out = original(conn, *args)
        os.link(path, tmp_path / "old.db")  # the file the server writes into, kept to look at
        shutil.copy(path, tmp_path / "new.db")
        os.replace(tmp_path / "new.db", path)
        return out

    monkeypatch.setattr(kvreg.app.plans, "set_demand", set_demand_then_swap)
    client = _InProcess(create_app(url, allow_writes=True))
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/plans/new").text).group(1)
    r = client.request("POST", "/plans/chat-llama3-8b/demand",
                       data={"csrf_token": token, "quarter": "2027Q1", "users": "40"})
    assert r.status_code == 503 and "was replaced by another file after kvreg serve opened it" in r.text
    for file in ("old.db", "registry.db"):
        quarters = [d["quarter"] for d in Kvreg(f"sqlite:///{tmp_path / file}").json("demand", "list")]
        assert "2027Q1" not in quarters and "2026Q4" in quarters, file


def test_plan_pages_show_which_limit_binds(db_url):
    """A plan with a latency target: the plans table and the plan's page add the memory and latency limits and
    what binds (the chat plan at 15 ms per output token: 35 users a replica, its pool holds 268.85)."""
    kv = Kvreg(db_url)
    kv("plan", "set", "chat-llama3-8b", "--input-tokens", "1000", "--output-tokens", "500", "--tpot-ms", "15")
    s = Server(db_url)
    try:
        for path in ("/plans", "/plans/chat-llama3-8b"):
            html = s.get(path)[2].decode()
            assert "latency limit" in html and "binds" in html and ">latency<" in html, path
            assert ">268.85<" in html and ">35<" in html, path
    finally:
        s.stop()
