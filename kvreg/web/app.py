"""The Starlette application behind `kvreg serve`.

Every page reads the registry through the library functions the CLI calls; the API returns the
bytes `kvreg capacity --format json` prints. Writes (plan add, demand set) exist only when the
server was started with --allow-writes, behind a CSRF token, each in one transaction.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import os
import re
import secrets
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from kvreg.app import options
from kvreg.core.errors import KvregError, user_error_types
from kvreg.db.read import snapshot
from kvreg.export.text import BLANK_TEXT, cell, normalise, render
from kvreg.figures.inputs import DEFAULT_GPU, ENGINE_SETTINGS, INPUTS
from kvreg.figures.labels import (FITS_IN_MEMORY, SERVES_NO_USER, capitalized, label,
                                  serves_no_user, users_served)

STATIC = Path(__file__).resolve().parent / "static"
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1"]


def is_loopback(host: str) -> bool:
    """Whether an address to listen on is this machine's alone: localhost, or any of 127.0.0.0/8 and ::1."""
    import ipaddress

    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
# The contexts of the what-if chart: 2K, 4K, ... (binary) up to the model's claimed context.
SWEEP_FIRST = 2048
DEFAULT_MODEL = "Llama-3.1-8B"
WHATIF_MODELS = "SELECT name, max_position_embeddings FROM model ORDER BY name"

# Columns of the registry tables: (key, heading). The figures are view columns.
MODEL_COLUMNS = [("name", "model"), ("family", "family"), ("architecture", "architecture"), ("layers", "layers"),
                 ("attention", "attention layout"), ("kv_heads", "KV heads"), ("head_dim", "head dim"),
                 ("params_b", "params (B)"), ("weight_dtype", "weights"), ("max_position_embeddings", "claimed context"),
                 ("kv_bytes_per_token", "KV B/token (bf16)"), ("kv_gib_per_128k_sequence", "KV GiB per 128K"),
                 ("weights_gb", "weights GB")]
GPU_COLUMNS = [("name", "GPU"), ("vendor", "vendor"), ("memory_gib", "memory GiB"),
               ("memory_bandwidth_tb_per_s", "bandwidth TB/s"), ("price_per_hour", "USD/hour"),
               ("unit_price", "USD/card"), ("interconnect", "interconnect")]
# The dtype page: these columns with their headings, then any dtype column declared since (kvreg.figures.inputs, its
# label), before the notes; the scale bytes stay off the page (the KV dtype's figures show what they add).
_DTYPE_LAID_OUT = [("name", "dtype"), ("kind", "used for"), ("bytes_per_element", "bytes/element"),
                   ("mla_bytes_per_token_per_layer", "MLA B/token/layer")]
_DTYPE_OFF_PAGE = ("scale_bytes_per_token_per_head",)
DTYPE_COLUMNS = [*_DTYPE_LAID_OUT,
                 *{d.column: (d.column, d.label) for d in INPUTS.values() if d.table.endswith("_dtype")
                   and d.column not in dict(_DTYPE_LAID_OUT) and d.column not in _DTYPE_OFF_PAGE}.values(),
                 ("notes", "notes")]
PLAN_COLUMNS = [("plan", "plan"), ("model", "model"), ("gpu", "GPU"), ("rule", "rule"), ("tp", "TP"), ("pp", "PP"),
                ("gpus_per_node", "GPUs/node"), ("context_tokens", "context"), ("workload_tokens", "workload tokens"),
                ("kv_dtype", "KV"), ("kv_pool_gib_per_gpu", "KV pool GiB/GPU"), ("max_concurrency", "max concurrency"),
                ("users_per_replica", "users/replica"), ("fits", FITS_IN_MEMORY), ("reason", "why not")]
QUARTER_COLUMNS = [("quarter", "quarter"), ("users", "users"), ("users_per_replica", "users/replica"),
                   ("replicas_needed", "replicas"), ("gpus_needed", "GPUs"), ("nodes_needed", "nodes"),
                   ("headroom_users", "headroom users"), ("headroom_fraction", "headroom share"),
                   ("cost_per_month", "USD/month"), ("capex", "capex USD"), ("reason", "why not")]
# A plan with a latency target: the two limits users/replica is the smaller of, and which binds (memory or
# latency), after users/replica; shown when some plan on the page has a target.
LATENCY_COLUMNS = [("workload_concurrency", "memory limit"), ("latency_concurrency_limit", "latency limit"),
                   ("users_binding_constraint", "binds")]
# The plan page's facts read as the declared labels (kvreg.figures.labels), but fits and reason as the plans
# table's headings: the page prints fits as yes or no, and a reason is also said of plans that fit.
FITS_HEADING = capitalized(FITS_IN_MEMORY)
FACT_LABELS = {"fits": FITS_HEADING, "reason": "Why not"}


def _with_latency(columns: list[tuple[str, str]], rows: list[dict]) -> list[tuple[str, str]]:
    """`columns` with LATENCY_COLUMNS after users/replica when a row has a latency target."""
    if not any(r.get("users_binding_constraint") for r in rows):
        return columns
    at = [k for k, _ in columns].index("users_per_replica") + 1
    return columns[:at] + LATENCY_COLUMNS + columns[at:]


# The procurement page: the purchase schedule, what to buy first, then why. Keys are the columns
# `kvreg plan rollup --format json` prints (kvreg.db.read.purchase_schedule's rows and totals).
ROLLUP_COLUMNS = [("gpu", "GPU"), ("quarter", "quarter"), ("gpus_to_buy", "to buy"), ("capex_to_buy", "capex USD"),
                  ("order_by", "order by"), ("order_late", "order late"), ("driving_plans", "driven by (GPUs more)"),
                  ("gpus_needed", "GPUs needed"), ("gpus_installed", "installed"), ("gpus_bought", "bought so far"),
                  ("gpus_spare", "spare"), ("plans", "plans"), ("plans_not_fitting", "not fitting"), ("users", "users"),
                  ("nodes_needed", "nodes"), ("cost_per_month", "USD/month"),
                  ("previous_quarter_gpus_needed", "GPUs needed before"), ("gpus_needed_quarter_change", "change")]
ROLLUP_OPTIONAL = ()
# The schedule's totals per GPU type, and overall as the last row (gpu "total", as `plan rollup` prints it).
SCHEDULE_TOTALS = [("gpu", "GPU"), ("gpus_to_buy", "to buy"), ("capex_to_buy", "capex USD"),
                   ("first_order_by", "first order by"), ("orders_late", "orders late")]
# The per-quarter totals under the procurement table (as the workbook's Total row: counts and dollars add up).
ROLLUP_TOTALS = [("quarter", "quarter"), ("gpus_needed", "GPUs needed"), ("gpus_installed", "installed"),
                 ("gpus_to_buy", "to buy"), ("capex_to_buy", "capex USD"), ("users", "users"),
                 ("cost_per_month", "USD/month")]
# The most scenarios (models x GPUs x contexts x KV dtypes) one request may ask: 24 models x 10 GPUs x 10
# contexts. A larger question is refused with the count, before anything is computed.
MAX_SCENARIOS = 2400
# The report downloads: path name -> (kvreg report format, media type).
REPORT_FILES = {"report.zip": ("md", "application/zip"),
                "capacity.md": ("md", "text/markdown; charset=utf-8"),
                "capacity.xlsx": ("xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")}
REPORTS_AT_ONCE = 2
# The figures of one what-if answer, in the order the page shows them: (key, label, unit).
ANSWER_FIGURES = [
    ("kv_bytes_per_token_per_gpu", "KV per token per GPU", "B"),
    ("kv_gib_per_sequence_per_gpu", "KV per sequence per GPU", "GiB"),
    ("state_bytes_per_sequence_per_gpu", "state per sequence per GPU", "B"),
    ("weights_gib_per_gpu", "weights per GPU", "GiB"),
    ("usable_gib_per_gpu", "usable per GPU", "GiB"),
    ("kv_pool_gib_per_gpu", "KV pool per GPU", "GiB"),
    ("kv_pool_tokens", "KV pool", "tokens"),
    ("sglang_state_slots", "state slots", "requests"),
    ("kv_cache_tokens", "engine KV cache", "tokens"),
    ("sequences_per_rank", "sequences the pool holds", ""),
    ("max_running_requests", "engine runs at most", "requests"),
    ("whole_sequences", "whole sequences", ""),
    ("replicas_per_node", "replicas per node", ""),
    # with request lengths (and targets): the latency a replica gives them, and what binds
    ("tpot_ms", "time per output token", "ms"),
    ("ttft_ms", "time to first token", "ms"),
    ("output_tokens_per_s_per_gpu", "output per GPU", "tokens/s"),
    ("max_concurrency_within_slo", "requests within the targets", ""),
    ("binding_constraint", "limited by", ""),
]


# Text figures that are sentences with counts in them, and the bare counts in them (4+ digits, not part
# of a word, a decimal, a date or a quarter).
PROSE_KEYS = ("reason", "limited_by")
_GROUP = re.compile(r"(?<![\w.,:/-])\d{4,}(?![\w.,:/]|-\d)")


def _plain(row: dict) -> dict:
    """Decimal (PostgreSQL sums) as int or float, like every other value."""
    return {k: (int(v) if v == v.to_integral_value() else float(v)) if isinstance(v, Decimal) else v
            for k, v in row.items()}


def _fmt(value, key: str = "") -> str:
    """A value as the CLI's table prints it (fits as yes or no)."""
    if key in ("fits", "tp_valid", "weights_fit", "context_within_claim", "order_late") and value in (0, 1):
        return "yes" if value else "no"
    if key in PROSE_KEYS and isinstance(value, str):
        # the views' sentences print counts bare ("beyond the model's 131072-token claim"): grouped here
        # like every other number on the page; a quarter (2026Q4) or a date is not a count
        return _GROUP.sub(lambda m: f"{int(m.group(0)):,}", " ".join(value.split()))
    return cell(normalise([{key: value}])[0][key], key)


def _request_tokens(pairs: list) -> int:
    """A what-if's request length, --input-tokens + --output-tokens as typed (8k), or 0 when either is missing or
    not understood (the answer says why)."""
    from kvreg.core.units import parse_tokens

    given = dict(pairs)
    try:
        return parse_tokens(given["input-tokens"]) + parse_tokens(given["output-tokens"])
    except (KeyError, *user_error_types()):
        return 0


class MissingColumn(RuntimeError):
    """A page asked for a column its rows do not have (a view or library function renamed it): a server
    error the tests see, never a silently empty column."""


def _table(rows: list[dict], columns: list[tuple[str, str]], links: dict | None = None,
           optional: tuple[str, ...] = ()) -> dict:
    """What templates/web/table.html.j2 needs: headings, and per row (text, sort key, link) cells.

    Every column must be a key of every row, except `optional` ones, which are shown only when some
    row has them."""
    links = links or {}
    columns = [(k, h) for k, h in columns if k not in optional or any(k in r for r in rows)]
    out = []
    for r in normalise([_plain(r) for r in rows]):
        cells = []
        for key, _ in columns:
            if key not in r and key not in optional:
                raise MissingColumn(f"the rows have no column {key!r} (they have {', '.join(r)})")
            v = r.get(key)
            sort = v if isinstance(v, (int, float)) and not isinstance(v, bool) else ("" if v is None else str(v))
            link = links[key](r) if key in links else None
            cells.append({"text": _fmt(v, key), "sort": sort, "link": link,
                          "num": isinstance(sort, (int, float)), "prose": key in PROSE_KEYS})
        out.append(cells)
    return {"columns": columns, "rows": out}


class App:
    """The registry, the settings and the pages; `starlette()` makes the ASGI application."""

    def __init__(self, url: str | None, *, allow_writes: bool = False, host: str = "127.0.0.1"):
        from kvreg.db import fastpath

        self.url = url or os.environ.get("KVREG_DB") or fastpath.DEFAULT_URL  # kvreg.db.engine.resolve_url
        self.allow_writes = allow_writes
        self.host = host
        # The synchronizer token of every form this process serves: a page from another site cannot
        # read it, so it cannot post a form that carries it.
        self.csrf_token = secrets.token_urlsafe(32)
        self._engine = None
        self._lock = threading.Lock()
        self._warm_up: threading.Timer | None = None
        self._warm_lock = threading.Lock()
        self._answered = False
        # A SQLite registry that is already current is read the way `kvreg capacity` reads it (kvreg.db.fastpath:
        # stdlib sqlite3, no SQLAlchemy), so the what-if page answers within a second of starting; it is opened
        # the full way in the background (warm_up_later) or on first use by another page, and from then on
        # every page uses that engine. Anything else is opened (created, upgraded, seeded) now.
        self.fast = fastpath.read(self.url, lambda conn: True)[0]
        if not self.fast:
            self.engine  # noqa: B018 - open now: a bad URL or a newer registry is an error at start
            self.fast = fastpath.read(self.url, lambda conn: True)[0]
        # The SQLite file this server opened, by device and inode: if it is deleted or replaced while the
        # server runs, the open connections would go on reading and writing the unlinked file, and a form
        # would say "saved" for a write nobody will see. Every request checks it (registry_moved).
        self.registry_file = fastpath.sqlite_file(self.url)
        self._identity = _identity(self.registry_file) if self.registry_file else None
        # Reports are built two at a time: each holds a registry connection and a few hundred MB; more
        # downloads wait their turn (without holding a worker thread) instead of failing.
        self.report_slots = None
        self._building: dict[tuple[str, str], asyncio.Future] = {}
        # A plain sqlite:///path URL holds no password; any other is masked by SQLAlchemy's parser.
        self.masked_url = self.url if fastpath.sqlite_file(self.url) else _mask(self.url)

    def registry_moved(self) -> str | None:
        """Why the registry file this server opened is no longer at its path (deleted or replaced), or None."""
        if self._identity is None:
            return None
        now = _identity(self.registry_file)
        if now == self._identity:
            return None
        what = "deleted" if now is None else "replaced by another file"
        return (f"the registry {self.registry_file} was {what} after kvreg serve opened it; nothing was read "
                "or written: restart kvreg serve to serve the file now at that path")

    def check_registry(self) -> None:
        """Raise RegistryMoved if the registry file was deleted or replaced (called inside each write
        transaction, before it commits, so a write into an unlinked file is rolled back)."""
        moved = self.registry_moved()
        if moved:
            raise RegistryMoved(moved)

    def moved_page(self, message: str) -> HTMLResponse:
        return self.page("error.html.j2", 503, title="Registry moved", message=message)

    @property
    def engine(self):
        """The registry opened as every CLI command opens it (kvreg.app.access.open_registry), once."""
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    from kvreg.app.access import open_registry

                    self._engine = open_registry(self.url)
        return self._engine

    def warm_up_later(self, delay: float = 0.5) -> None:
        """Open the registry the full way in the background, `delay` seconds after the first page has been
        rendered (once). Not on a timer from start-up: on a busy machine the first page can take more
        than a second, and importing SQLAlchemy in the background (0.15 s of CPU) would hold the
        interpreter while that page waits."""
        with self._warm_lock:
            if self._warm_up is None:
                self._warm_up = threading.Timer(delay, lambda: self.engine)
                self._warm_up.daemon = True
                if self._answered:
                    self._warm_up.start()

    def _first_page_answered(self) -> None:
        with self._warm_lock:
            if not self._answered:
                self._answered = True
                if self._warm_up is not None:
                    self._warm_up.start()

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()

    def read(self, fn):
        """fn(conn) on the fast path's sqlite3 connection when it can take it, else on a SQLAlchemy
        connection; fn reads through kvreg.app.capacity.runner, which runs the same SQL on both.

        The fast path serves until the registry is open (it checks the registry is current on every
        call: a few tens of milliseconds), then the open engine's pooled connections do."""
        if self.fast and self._engine is None:
            from kvreg.db import fastpath

            ok, result = fastpath.read(self.url, fn)
            if ok:
                return result
        with snapshot(self.engine) as conn:  # reads wait for no writer
            return fn(conn)

    # ------------------------------------------------------------------ plumbing

    @functools.cached_property
    def templates(self):
        import jinja2

        import kvreg

        folder = Path(kvreg.resource_dir("templates")) / "web"
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), autoescape=True,
                                 undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        env.filters["fmt"] = _fmt
        env.filters["pathpart"] = _q  # a name as one path segment: a/b as a%2Fb (urlencode keeps the slash)
        env.globals.update(app=self, figures=ANSWER_FIGURES)
        return env

    def page(self, template: str, status: int = 200, **context) -> HTMLResponse:
        context.setdefault("nav", "")
        context.setdefault("intro", None)
        html = self.templates.get_template(template).render(**context)
        self._first_page_answered()
        return HTMLResponse(html, status_code=status)

    def not_found(self, message: str) -> HTMLResponse:
        return self.page("error.html.j2", 404, title="Not found", message=message)

    def starlette(self) -> Starlette:
        routes = [
            Route("/", self.whatif),
            Route("/whatif/answer", self.whatif_answer),
            Route("/api/capacity", self.api_capacity),
            Route("/models", self.models),
            Route("/models/{name:path}", self.model),
            Route("/gpus", self.gpus),
            Route("/dtypes", self.dtypes),
            Route("/plans", self.plans),
            Route("/plans", self.plan_add, methods=["POST"]),
            Route("/plans/new", self.plan_new),
            # {name:path}: a plan may be named a/b (the link quotes it as a%2Fb, which arrives decoded)
            Route("/plans/{name:path}/demand", self.demand_set, methods=["POST"]),
            Route("/plans/{name:path}", self.plan),
            Route("/procurement", self.procurement),
            Route("/report/{quarter}/{kind}", self.report),
            Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
        ]
        hosts = (sorted({*LOOPBACK_NAMES, self.host.strip("[]")}) if is_loopback(self.host) else ["*"])
        # Only names of this machine on a loopback bind: a page elsewhere cannot reach it through DNS rebinding.
        middleware = [Middleware(Guard, app_=self), Middleware(TrustedHostMiddleware, allowed_hosts=hosts)]
        return Starlette(routes=routes, middleware=middleware, exception_handlers={404: self._404, 405: self._405})

    async def _404(self, request, exc):
        return self.not_found(f"there is no page at {request.url.path}")

    async def _405(self, request, exc):
        return self.page("error.html.j2", 405, title="Method not allowed",
                         message=f"{request.method} is not accepted at {request.url.path}")

    # ------------------------------------------------------------------ what-if

    def _capacity(self, items) -> dict:
        """Answer a what-if from query items: the rows and everything the page shows about them,
        or the one-line error."""
        from kvreg.app.capacity import ask, question_columns, question_from_options
        from kvreg.db import fastpath

        pairs: list = []
        try:
            pairs = options.given(items, options.CAPACITY)
            params = options.parse(options.CAPACITY, pairs)
            if "context" not in dict(pairs) and params.get("input_tokens") is not None:
                params["context"] = None  # as the CLI: the requests' input + output tokens
            q = question_from_options(**params)

            def answer(conn):
                _check_size(conn, q)
                return ask(conn, q)

            # As `kvreg capacity` answers: the fast path, else the registry opened the full way.
            ok, rows = fastpath.read(self.url, answer) if self.fast and self._engine is None else (False, None)
            if not ok:
                with snapshot(self.engine) as conn:  # reads wait for no writer
                    rows = answer(conn)
        except user_error_types() as exc:
            return {"error": " ".join(str(exc).split()), "pairs": pairs}
        return {"error": None, "pairs": pairs, "rows": rows, "rule": q.rule, "columns": question_columns(q)}

    def _sweep_query(self, pairs: list, model: str | None) -> str | None:
        """The API query of the chart: the same question at 2K, 4K, ... up to the model's claim."""
        if not model:
            return None
        from kvreg.app.capacity import SQL, runner
        from kvreg.core.units import parse_token_list

        found = self.read(lambda conn: runner(conn).rows(SQL["model"], {"name": model}))
        if not found:
            return None
        claim = found[0]["max_position_embeddings"]
        # Up to the claim, and on to the longest context asked when that is longer (a 1M question about a
        # 128K model draws to 1M: the points past the claim are the ones asked about).
        asked = 0
        for k, v in pairs:
            if k == "context":
                try:
                    asked = max([asked, *parse_token_list(v)])
                except user_error_types():
                    pass
        top = max(claim, asked)
        contexts, n = [], SWEEP_FIRST
        while n < top:
            contexts.append(n)
            n *= 2
        # With request lengths, from the first context that holds a request (input + output tokens): a shorter
        # one is refused (kvreg.app.capacity.check_request_fits).
        request = _request_tokens(pairs)
        contexts = sorted({c for c in {*contexts, claim, top} if c >= request} | ({request} if request else set()))
        return options.query(pairs, context=",".join(str(c) for c in contexts))

    def _answer_context(self, items) -> dict:
        from kvreg.app.capacity import columns

        answer = self._capacity(items)
        pairs = answer["pairs"]
        model = next((v for k, v in pairs if k == "model"), None)
        cards = []
        for r in normalise(answer.get("rows", [])):
            cards.append({"row": r, "figures": [(k, label, unit) for k, label, unit in ANSWER_FIGURES
                                                if k in answer["columns"] and r.get(k) is not None]})
        return dict(
            answer=answer, cards=cards,
            cli=options.command_line(["kvreg", "capacity"], pairs) + " --format json",
            api="/api/capacity?" + options.query(pairs),
            sweep=None if answer["error"] else self._sweep_query(pairs, model.split(",")[0] if model else None),
            json_columns=answer.get("columns") or columns(answer.get("rule", "theoretical")),
        )

    def whatif(self, request: Request):
        from kvreg.app.capacity import SQL, runner

        items = list(request.query_params.multi_items())

        def lists(conn):
            db = runner(conn)
            return (db.rows(WHATIF_MODELS), [r["name"] for r in db.rows(SQL["gpu_names"])],
                    *([r["name"] for r in db.rows(SQL["dtype_names"], {"kind": k})] for k in ("kv", "weight")))

        model_rows, gpus, kv_dtypes, weight_dtypes = self.read(lists)
        models = [m["name"] for m in model_rows]
        claims = {m["name"]: m["max_position_embeddings"] for m in model_rows}
        if not any(k == "model" for k, _ in items) and models:
            items.insert(0, ("model", DEFAULT_MODEL if DEFAULT_MODEL in models else models[0]))
        values: dict[str, list[str]] = {}
        for k, v in items:
            values.setdefault(k, []).append(v)
        defaults = options.form_defaults(options.CAPACITY)
        chosen_gpus = [g.strip() for v in values.get("gpu", []) for g in v.split(",") if g.strip()] or [DEFAULT_GPU]
        return self.page(
            "whatif.html.j2", title="What-if", nav="whatif", models=models, gpus=gpus, kv_dtypes=kv_dtypes,
            weight_dtypes=weight_dtypes, values={k: ",".join(v) for k, v in values.items()}, defaults=defaults,
            chosen_gpus=chosen_gpus, claims=claims, field_of=options.form_field, rules=INPUTS["rule"].choices,
            engine=[options.form_field(n) for n in ENGINE_SETTINGS],
            declared=[options.form_field(n) for n in options.declared_inputs(options.CAPACITY)],
            **self._answer_context(items),
        )

    def whatif_answer(self, request: Request):
        """The answer part of the what-if page, which the page's script swaps in as inputs change."""
        start = time.perf_counter()
        ctx = self._answer_context(list(request.query_params.multi_items()))
        status = 400 if ctx["answer"]["error"] else 200
        return _timed(self.page("answer.html.j2", status, **ctx), start)

    def api_capacity(self, request: Request):
        """`kvreg capacity --format json` for the same options: the same bytes."""
        start = time.perf_counter()
        answer = self._capacity(list(request.query_params.multi_items()))
        if answer["error"]:
            import json

            return _timed(Response(json.dumps({"error": answer["error"]}, ensure_ascii=False) + "\n", 400,
                                   media_type="application/json"), start)
        return _timed(Response(render(answer["rows"], "json", answer["columns"]), media_type="application/json"),
                      start)

    # ------------------------------------------------------------------ registry

    def models(self, request: Request):
        from kvreg.app.registry import list_models

        with snapshot(self.engine) as conn:  # reads wait for no writer
            rows = list_models(conn)
            kv = self._model_kv(conn, "bf16")
        for m in rows:
            m.update(kv.get(m["name"], {}))
            # A display conversion, not a figure: no declaration holds parameters in billions (the
            # CLI's model list prints params_total as stored); the page has always shown billions.
            m["params_b"] = m["params_total"] / 1e9 if m["params_total"] else None
            m["attention"] = _layout(m)
        table = _table(rows, MODEL_COLUMNS, {"name": lambda r: f"/models/{_q(r['name'])}"})
        return self.page("table.html.j2", title="Models", nav="models", table=table,
                         intro="Every model in the registry with its KV cache per token and per 128K sequence in "
                               "bf16 (the model_kv view). Click a heading to sort; type to filter.")

    @staticmethod
    def _model_kv(conn, kv_dtype: str) -> dict:
        from sqlalchemy import text

        sql = ("SELECT model, kv_bytes_per_token, kv_bytes_per_token_full, state_bytes_per_sequence,"
               " kv_gib_per_128k_sequence, weights_gb FROM model_kv WHERE kv_dtype = :kv")
        return {r["model"]: dict(r) for r in conn.execute(text(sql), {"kv": kv_dtype}).mappings()}

    def model(self, request: Request):
        from kvreg.app.capacity import TABLE_COLUMNS, model_context_figures
        from kvreg.app.registry import get_model, gpu_names

        name = request.path_params["name"]
        gpu = request.query_params.get("gpu") or DEFAULT_GPU
        try:
            with snapshot(self.engine) as conn:  # reads wait for no writer
                model = get_model(conn, name)
                gpus = gpu_names(conn)
                figures = model_context_figures(conn, name, gpu)
        except user_error_types() as exc:
            return self.not_found(" ".join(str(exc).split()))
        model.pop("id", None)
        provenance_keys = ("source", "source_sha256", "imported_at", "notes")
        architecture = [(k, _fmt(v, k)) for k, v in model.items() if k not in provenance_keys and k != "name"
                        and v is not None]
        provenance = [(k, model.get(k)) for k in provenance_keys]
        cols = [(c, c.replace("_", " ")) for c in TABLE_COLUMNS if c not in ("model", "gpu")]
        return self.page("model.html.j2", title=name, nav="models", model=model, architecture=architecture,
                         provenance=provenance, gpus=gpus, gpu=gpu, table=_table(figures, cols))

    def gpus(self, request: Request):
        from kvreg.app.registry import list_gpus
        from kvreg.figures.python import with_gpu_figures

        with snapshot(self.engine) as conn:  # reads wait for no writer
            rows = [with_gpu_figures(g) for g in list_gpus(conn)]  # memory_gib, as `kvreg gpu list` shows it
        for g in rows:
            # A display conversion like params_b: no figure declares the bandwidth in TB/s.
            bw = g.get("memory_bandwidth_bytes_per_s")
            g["memory_bandwidth_tb_per_s"] = bw / 1e12 if bw else None
        return self.page("table.html.j2", title="GPUs", nav="gpus", table=_table(rows, GPU_COLUMNS),
                         intro="GPUs in the registry: memory (the vendor's HBM size), bandwidth and prices.")

    def dtypes(self, request: Request):
        from kvreg.app.registry import list_dtypes

        with snapshot(self.engine) as conn:  # reads wait for no writer
            rows = list_dtypes(conn)
        return self.page("table.html.j2", title="Dtypes", nav="dtypes", table=_table(rows, DTYPE_COLUMNS),
                         intro="Number formats for the KV cache and the weights, with their exact bytes.")

    # ------------------------------------------------------------------ plans and procurement

    def plans(self, request: Request):
        from kvreg.db.read import list_plans

        with snapshot(self.engine) as conn:  # reads wait for no writer
            rows = list_plans(conn)
        table = _table(rows, _with_latency(PLAN_COLUMNS, rows), {"plan": lambda r: f"/plans/{_q(r['plan'])}"})
        return self.page("plans.html.j2", title="Plans", nav="plans", table=table,
                         added=request.query_params.get("added"))

    def plan(self, request: Request):
        from kvreg.db.read import show_plan

        name = request.path_params["name"]
        try:
            with snapshot(self.engine) as conn:  # reads wait for no writer
                rows = show_plan(conn, name)
        except user_error_types() as exc:
            return self.not_found(" ".join(str(exc).split()))
        return self._plan_page(name, rows, request.query_params.get("done"))

    def _plan_page(self, name: str, rows: list[dict], done: str | None = None, error: str | None = None,
                   form: dict | None = None, status: int = 200):
        figures = normalise([_plain(rows[0])])[0]
        quarters = [r for r in rows if r.get("users") is not None]
        keep = [k for k, _ in _with_latency(PLAN_COLUMNS, rows[:1]) if k != "plan"] + [
            "avg_tokens", "weights_gib_per_gpu", "workload", "kv_bytes_per_token_per_gpu", "input_tokens",
            "output_tokens", "tpot_target_ms", "ttft_target_ms"]
        # A plan with a latency target shows its latency limit even when none binds ("none"), in readable labels.
        targeted = figures.get("users_binding_constraint") is not None
        record = [(k, FACT_LABELS.get(k) or label(k), _fmt(figures.get(k), k)) for k in keep
                  if figures.get(k) not in (None, "") or (targeted and k in BLANK_TEXT)]
        # The lead, as the report's plan section words it: a plan whose latency target one request misses serves
        # no user (its reason says which target), one that does not fit says why; any other plan with a target
        # says which limit binds and the users a replica serves.
        lead = None
        if targeted:
            why = _fmt(figures.get("reason"), "reason")
            if serves_no_user(figures.get("fits"), figures.get("users_per_replica")):
                lead = f"{SERVES_NO_USER}: {why}"
            elif not figures.get("fits"):
                lead = f"Does not fit: {why}"
            else:
                lead = users_served(figures["users_binding_constraint"],
                                    _fmt(figures.get("users_per_replica"), "users_per_replica"))
            lead = capitalized(lead)
        return self.page("plan.html.j2", status, title=name, nav="plans", name=name, record=record, lead=lead,
                         notes=figures.get("notes"),
                         quarters=_table(quarters, _with_latency(QUARTER_COLUMNS, quarters)) if quarters else None,
                         done=done, error=error,
                         form=form or {})

    def procurement(self, request: Request):
        # The function `kvreg plan rollup --format json` prints: a key it adds or renames reaches this page.
        # The horizon follows the one rule (kvreg.db.read.schedule_horizon): from ?from=2027Q1, by default
        # the current quarter.
        from kvreg.db.read import purchase_schedule

        start = request.query_params.get("from") or None
        try:
            with snapshot(self.engine) as conn:  # reads wait for no writer
                sched = purchase_schedule(conn, start=start)
        except user_error_types() as exc:
            return self.not_found(" ".join(str(exc).split()))
        rows, quarters = sched["schedule"], sched["quarters"]
        late = [r for r in rows if r["order_late"]]
        return self.page("procurement.html.j2", title="Procurement", nav="procurement",
                         table=_table(rows, ROLLUP_COLUMNS, optional=ROLLUP_OPTIONAL), quarters=quarters,
                         chosen=quarters[0], late=late,
                         by_gpu=_table([*sched["totals"], {"gpu": "total", **sched["total"]}], SCHEDULE_TOTALS),
                         totals=_table(_quarter_totals(rows), ROLLUP_TOTALS))

    async def report(self, request: Request):
        """This quarter's report or workbook, written on request into a private folder (kvreg.report writes
        beside and swaps into place) and sent. report.zip is the Markdown report with its charts (the PNGs
        capacity.md embeds) and data.json, as `kvreg report` writes the quarter's folder."""
        import anyio
        from starlette.concurrency import run_in_threadpool

        from kvreg.core.units import parse_quarter

        kind = request.path_params["kind"]
        if kind not in REPORT_FILES:
            return self.not_found(f"no report file {kind!r}: {', '.join(REPORT_FILES)}")
        try:
            quarter = parse_quarter(request.path_params["quarter"])
        except user_error_types() as exc:
            return self.not_found(" ".join(str(exc).split()))
        # Downloads of the same file while it is being built share that build: 40 people clicking at once
        # cost one build, not 40 (and never more registry connections than the pool holds).
        key = (quarter, kind)
        building = self._building.get(key)
        if building is None:
            building = self._building[key] = asyncio.get_running_loop().create_future()
            try:
                if self.report_slots is None:
                    self.report_slots = anyio.Semaphore(REPORTS_AT_ONCE)
                async with self.report_slots:
                    result = await run_in_threadpool(self._report_bytes, quarter, kind)
            except BaseException as exc:
                building.set_exception(exc)
                building.exception()  # retrieved: no warning when nobody else was waiting
                raise
            else:
                building.set_result(result)
            finally:
                del self._building[key]
        else:
            result = await asyncio.shield(building)
        if isinstance(result, str):
            return self.page("error.html.j2", 400, title="No report", message=result)
        body, name = result
        return Response(body, media_type=REPORT_FILES[kind][1],
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    def _report_bytes(self, quarter: str, kind: str) -> tuple[bytes, str] | str:
        """The file's bytes and download name, or the one-line error."""
        import io
        import zipfile

        from kvreg.core.units import quarter_folder
        from kvreg.report import write_report

        fmt = REPORT_FILES[kind][0]
        folder_name = quarter_folder(quarter)
        with tempfile.TemporaryDirectory(prefix="kvreg-serve-") as out:
            try:
                write_report(self.engine, quarter, out, (fmt,), registry_url=self.url)
            except user_error_types() as exc:
                return " ".join(str(exc).split())
            folder = Path(out) / folder_name
            if kind != "report.zip":
                return (folder / kind).read_bytes(), f"kvreg-{folder_name}-{kind}"
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
                for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                    z.write(path, f"{folder_name}/{path.relative_to(folder).as_posix()}")
            return buf.getvalue(), f"kvreg-{folder_name}-report.zip"

    # ------------------------------------------------------------------ writes

    def _refuse(self, request: Request, form) -> Response | None:
        """403 unless writes are on and the form carries this server's token (and, when the browser
        says where the form came from, it came from this server)."""
        if not self.allow_writes:
            return self.page("error.html.j2", 403, title="Read-only",
                             message="this server is read-only: start it with `kvreg serve --allow-writes` "
                                     "to add plans and set demand")
        origin = request.headers.get("origin")
        if origin and origin != "null" and origin.rstrip("/") != f"{request.url.scheme}://{request.url.netloc}":
            return self.page("error.html.j2", 403, title="Refused", message=f"a form from {origin} was refused")
        token = str(form.get("csrf_token", ""))
        if not hmac.compare_digest(token.encode(), self.csrf_token.encode()):
            return self.page("error.html.j2", 403, title="Refused",
                             message="the form's token is missing or stale: reload the page and submit again")
        return None

    def plan_new(self, request: Request):
        if not self.allow_writes:
            return self.page("error.html.j2", 403, title="Read-only",
                             message="this server is read-only: start it with `kvreg serve --allow-writes` "
                                     "to add plans")
        return self._plan_form({})

    def _plan_form(self, form: dict, error: str | None = None, status: int = 200):
        from kvreg.app.registry import dtype_names, gpu_names, model_names

        with snapshot(self.engine) as conn:  # reads wait for no writer
            lists = dict(models=model_names(conn), gpus=gpu_names(conn), kv_dtypes=dtype_names(conn, "kv"),
                         weight_dtypes=dtype_names(conn, "weight"))
        # The fields of plan add's options, each from its input's declaration as the what-if page's are
        # (templates/web/fields.html.j2), then those of any input declared since.
        return self.page("plan_new.html.j2", status, title="Add a plan", nav="plans", values=form, error=error,
                         defaults=options.form_defaults(options.PLAN_ADD), field_of=options.form_field,
                         declared=[options.form_field(n) for n in options.declared_inputs(options.PLAN_ADD)],
                         rules=INPUTS["rule"].choices, default_gpu=DEFAULT_GPU,
                         engine=[options.form_field(n) for n in ENGINE_SETTINGS], **lists)

    async def plan_add(self, request: Request):
        """`kvreg plan add NAME --option value ...` from the form: the same parsing, validation and
        one transaction."""
        from starlette.concurrency import run_in_threadpool

        form = await request.form()
        refused = self._refuse(request, form)
        if refused is not None:
            return refused
        return await run_in_threadpool(self._plan_add, dict(form))

    def _plan_add(self, form: dict):
        from kvreg.app.plans import add_plan, spec_from_options

        fields = {k: v for k, v in form.items() if k != "csrf_token"}
        name = str(fields.pop("name", "")).strip()
        try:
            if not name:
                raise KvregError("give the plan a name")
            pairs = options.given(fields.items(), options.PLAN_ADD)
            params = options.parse(options.PLAN_ADD, pairs, arguments=(name,))
            params.pop("name", None)
            spec = {"name": name, **spec_from_options(params, partial=False)}
            with self.engine.begin() as conn:
                add_plan(conn, spec)
                self.check_registry()
        except RegistryMoved as exc:
            return self.moved_page(str(exc))
        except user_error_types() as exc:
            return self._plan_form({"name": name, **fields}, " ".join(str(exc).split()), 400)
        return RedirectResponse(f"/plans/{_q(name)}?done=added", status_code=303)

    async def demand_set(self, request: Request):
        from starlette.concurrency import run_in_threadpool

        form = await request.form()
        refused = self._refuse(request, form)
        if refused is not None:
            return refused
        return await run_in_threadpool(self._demand_set, request.path_params["name"], dict(form))

    def _demand_set(self, name: str, form: dict):
        """`kvreg demand set PLAN QUARTER USERS`: the same validation, one transaction."""
        from kvreg.app.plans import set_demand
        from kvreg.db.read import show_plan

        quarter, users = str(form.get("quarter", "")).strip(), str(form.get("users", "")).strip()
        try:
            with self.engine.begin() as conn:
                set_demand(conn, name, quarter, users)
                self.check_registry()
        except RegistryMoved as exc:
            return self.moved_page(str(exc))
        except user_error_types() as exc:
            try:
                with snapshot(self.engine) as conn:  # reads wait for no writer
                    rows = show_plan(conn, name)
            except user_error_types():
                return self.not_found(" ".join(str(exc).split()))
            return self._plan_page(name, rows, error=" ".join(str(exc).split()),
                                   form={"quarter": quarter, "users": users}, status=400)
        return RedirectResponse(f"/plans/{_q(name)}?done=demand", status_code=303)


def _quarter_totals(rows: list[dict]) -> list[dict]:
    """The rollup's counts and dollars summed over GPU types, per quarter (the workbook's Total row)."""
    out: dict[str, dict] = {}
    for r in rows:
        t = out.setdefault(r["quarter"], {"quarter": r["quarter"]})
        for key, _ in ROLLUP_TOTALS[1:]:
            # a blank (capex without a unit_price) adds nothing, as in the workbook's SUM
            t[key] = t.get(key, 0) + (_plain({key: r[key]})[key] or 0)
    return [out[q] for q in sorted(out)]


def _check_size(conn, q) -> None:
    """Refuse a question of more than MAX_SCENARIOS scenarios, saying how many it has and why."""
    from kvreg.app.capacity import runner

    models = len(q.models) or runner(conn).rows("SELECT COUNT(*) AS n FROM model")[0]["n"]
    counts = [(models, "model"), (len(q.gpus), "GPU"), (len(q.contexts), "context"), (len(q.kv_dtypes), "KV dtype")]
    total = 1
    for n, _ in counts:
        total *= n
    if total > MAX_SCENARIOS:
        product = " x ".join(f"{n:,} {what}{'' if n == 1 else 's'}" for n, what in counts)
        raise KvregError(f"this question has {total:,} scenarios ({product}); the web server answers at most "
                         f"{MAX_SCENARIOS:,} at a time: ask for fewer, or run the same `kvreg capacity` "
                         "command, which has no limit")


class RegistryMoved(KvregError):
    """The registry file was deleted or replaced while the server ran."""


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


# Sent with every answer: no page of this server may be framed by another site (clickjacking of the
# write forms); a browser must not guess another type for what it serves.
SECURITY_HEADERS = [(b"x-frame-options", b"DENY"), (b"content-security-policy", b"frame-ancestors 'none'"),
                    (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin")]


class Guard:
    """ASGI middleware in front of every route: the security headers on every answer; 403 for a POST to
    a read-only server, whatever its path; 503 when the registry file was deleted or replaced."""

    def __init__(self, app, *, app_: "App"):
        self.asgi = app
        self.kvreg = app_

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.asgi(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = list(message.get("headers", [])) + [h for h in SECURITY_HEADERS
                                                                         if h[0] not in names]
            await send(message)

        app: App = self.kvreg
        response = None
        if scope["method"] == "POST" and not app.allow_writes:
            response = app.page("error.html.j2", 403, title="Read-only",
                                message="this server is read-only: start it with `kvreg serve --allow-writes` "
                                        "to add plans and set demand")
        elif not scope["path"].startswith("/static/"):
            moved = app.registry_moved()
            if moved:
                response = app.moved_page(moved)
        if response is not None:
            return await response(scope, receive, send_with_headers)
        return await self.asgi(scope, receive, send_with_headers)


def _timed(response: Response, start: float) -> Response:
    """The server's time for the answer, as a Server-Timing header (browsers' dev tools and bench/serve.py read it)."""
    response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - start) * 1000:.2f}"
    return response


def _mask(url: str) -> str:
    from kvreg.db.engine import mask_url

    return mask_url(url)


def _q(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


def _layout(m: dict) -> str:
    """The attention layout as counts per kind (the model's own inputs, not a figure)."""
    parts = []
    if m.get("kv_lora_rank"):
        parts.append("MLA")
    for key, label in (("full_layers", "full"), ("sliding_layers", "sliding"), ("chunked_layers", "chunked"),
                       ("linear_layers", "linear")):
        if m.get(key):
            parts.append(f"{m[key]} {label}")
    return ", ".join(parts)


def create_app(url: str | None = None, *, allow_writes: bool = False, host: str = "127.0.0.1") -> Starlette:
    """The ASGI application for the registry at `url` (opened, upgraded and seeded as the CLI does)."""
    return App(url, allow_writes=allow_writes, host=host).starlette()
