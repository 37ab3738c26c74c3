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
    # each field's placeholder is the CLI option's default, blank where it has none (click's UNSET never shows)
    assert '<input name="context" id="context" value="32K" placeholder="128K"' in html
    assert '<input name="max-num-seqs" value="" placeholder=""' in html
    assert "UNSET" not in html
    # an engine rule's answer says what caps it: Llama-3.1-8B's 53 GiB pool holds 6,784 64-token requests, vLLM
    # runs 1,024 (tests/test_engine_rules.py test_the_engines_cap_on_running_requests)
    html = server.get("/?model=Llama-3.1-8B&gpu=H100-SXM&gpus-per-node=1&context=64&rule=vllm"
                      "&kv-cache-memory=53GiB")[2].decode()
    assert '<dd data-figure="sequences_per_rank" data-value="6784.0">6,784</dd>' in html
    assert '<dd data-figure="max_running_requests" data-value="1024">1,024 <small>requests</small></dd>' in html


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
