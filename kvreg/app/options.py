"""The options of the questions kvreg answers, declared once for the CLI and the web page, and how a
query string or form is read as them.

A command of kvreg.cli wears these options; the web page parses its queries and forms with the
same ones (`request_command`): a query `?model=Llama-3.1-8B&context=8K,32K&tp=auto` is parsed as
`kvreg capacity --model Llama-3.1-8B --context 8K,32K --tp auto` is, with the same names, defaults,
types and checks, so a new or changed option reaches the page without a second list to keep in
step, and neither front end imports the other.
"""

from __future__ import annotations

from typing import NamedTuple

import click

from kvreg.core.errors import KvregError
from kvreg.core.units import format_tokens
from kvreg.figures.inputs import DEFAULT_GPU, DEPLOYMENT_DEFAULTS as _D, ENGINE_SETTINGS, INPUTS

# --------------------------------------------------------------------------- the options

_CLICK_TYPES = {"int": int, "real": float, "text": None}
_UNSET = object()


def input_option(name: str, *, suffix: str = "", help: str | None = None, default=_UNSET, **kw):
    """A click option generated from an input's declaration (kvreg.figures.inputs.InputDecl): its flag
    (several, space-separated: the first names the parameter), its type (type=None: text the command parses,
    a size with its unit as 1.2GiB) and its help, ended with `suffix` (plan set: "; none clears it")
    and a period (but after an ellipsis). `default`: the declared default unless given (None: the option left out keeps the stored
    value). The option remembers its input (`.input`), so declared_options knows it is placed."""
    decl = INPUTS[name]
    flags = decl.flag.split()
    text = (decl.help if help is None else help) + suffix
    text += "" if text.endswith(".") else "."  # "bf16, fp8, ..." ends with its own
    kw.setdefault("type", _CLICK_TYPES[decl.kind])
    if default is _UNSET:
        default = decl.default
    if default is not None:
        kw["default"] = default

    def decorate(fn):
        option = click.Option(flags, help=text, **kw)
        option.input = name
        fn.__click_params__ = [*getattr(fn, "__click_params__", []), option]
        return fn

    return decorate


def declared_options(tables: tuple[str, ...], *, handled: tuple[str, ...] = (), defaults: bool = True):
    """Outermost on a command (right under its @command): a generated option (input_option) for every input of `tables` the command
    neither wears an option of (placed with input_option) nor gives otherwise (`handled`: --params-b gives
    params_total), listed last. An input declared with no flag (flag "") takes none. So an input added to
    kvreg.figures.inputs reaches `model add`, `gpu add` and `plan add` with no other edit; the command
    receives it under its column's name, among its keyword arguments."""

    def decorate(fn):
        params = getattr(fn, "__click_params__", [])
        placed = {getattr(p, "input", None) for p in params} | set(handled)
        names = [n for n in _declared_names(tables) if n not in placed and INPUTS[n].flag]
        # click lists a command's params from the end of __click_params__: reversed, they list in declaration order
        params[:0] = reversed([_param(n, defaults) for n in names])
        fn.__click_params__ = params
        return fn

    return decorate


def _declared_names(tables: tuple[str, ...]) -> list[str]:
    return [n for n, d in INPUTS.items() if d.table in tables]


def _param(name: str, defaults: bool) -> click.Option:
    decl = INPUTS[name]

    def fn():
        pass

    input_option(name, default=_UNSET if defaults else None)(fn)
    option = fn.__click_params__[0]
    option.name = decl.column  # the command receives it by its column
    option.generated = True
    return option


# What `kvreg gpu set` never changes (kvreg.app.registry.GPU_SETTABLE is every other GPU input): the GPU type's
# identity and the memory facts the figures size from, given again with `gpu add --replace`.
GPU_FIXED = ("gpu_name", "memory_bytes", "reported_memory_bytes", "memory_bandwidth_bytes_per_s", "compute_capability",
             "fabric")


class FormField(NamedTuple):
    """An input's field on a web form: the option it sets (the query's key: max-num-seqs), its label, its tooltip
    and the allocation rules that read it, space-separated ("": every rule), the form showing it only under them."""

    name: str
    label: str
    hint: str
    rule: str


def form_field(name: str) -> FormField:
    """The web form field of an input, from its declaration (kvreg.figures.inputs.InputDecl: flag, label, hint,
    rules); the forms write none by hand."""
    decl = INPUTS[name]
    return FormField(decl.flag.split()[0][2:], decl.label, decl.hint, " ".join(decl.rules))


def declared_inputs(command: click.Command) -> list[str]:
    """The inputs of a command's generated options (declared_options), in its order: those declared since the
    forms were laid out, which the web pages list after the fields they lay out."""
    return [p.input for p in command.params if getattr(p, "generated", False)]


def form_defaults(command: click.Command) -> dict[str, str]:
    """What each of a command's form fields takes left empty, by the field's name, as the placeholder a web form shows:
    the option's default, else the declared default of the input the option gives (kvreg.figures.inputs: --reserve
    has no default of its own, so that it can be told from --kv-cache-memory, and a new deployment takes 0.12); ""
    for none (an option without a default holds None, or click's UNSET sentinel from click 8.3) and for a list."""
    by_flag = {flag: decl for decl in INPUTS.values() for flag in decl.flag.split()}
    defaults = {}
    for name, opt in option_names(command).items():
        default = opt.default
        if not isinstance(default, (str, int, float)) and f"--{name}" in by_flag:
            default = by_flag[f"--{name}"].default
        defaults[name] = str(default) if isinstance(default, (str, int, float)) and not opt.multiple else ""
    return defaults


def engine_options(defaults: bool) -> list:
    """--rule and the engine's own settings (docs/engine-rules.md), for `kvreg capacity` and the plan
    commands, each generated from its input's declaration (flag, help, the engine defaults it names);
    parse them with kvreg.app.engine.parse_engine_options (text, read with units). Without defaults (plan set)
    an option left out keeps the stored value."""
    clears = "" if defaults else "; none clears it"
    return [
        input_option("rule", default=_D["rule"] if defaults else None, show_default=defaults,
                     help=f"Allocation rule: theoretical (a share of memory held back, --reserve, {_D['reserve']:.0%} by"
                     " default; see docs/methodology.md), vllm or sglang (what the engine allocates)"),
        *[input_option(name, suffix=clears, type=None, default=None) for name in ENGINE_SETTINGS],
    ]


def deployment_options(*, defaults: bool, many: bool = False, notes: bool = True, context: bool = True,
                       workload: bool = True, tp: str = str(_D["tp"]),
                       tp_auto: str = "the TP that serves the plan's peak demand, one user without demand, with the "
                                      "fewest GPUs: what `plan solve gpus` answers"):
    """The options of one deployment, declared once for `kvreg capacity`, the plan commands and the web
    page. many: `kvreg capacity`'s lists (several models, GPUs,
    contexts and KV dtypes in one question). Without defaults (plan set) an option left out keeps
    the stored value."""

    def d(value):
        return value if defaults else None

    if many:
        model = click.option("--model", "models", multiple=True,
                             help="Model name; repeat or comma-separate. Default: every model.")
        gpu = click.option("--gpu", "gpus", multiple=True, help=f"GPU name; repeat or comma-separate. Default: {DEFAULT_GPU}.")
        context_help = "Context tokens, comma-separated; 128K = 131,072, 128k = 128,000, 1m = 1,000,000."
        kv_dtype_help = "KV cache dtypes, comma-separated: bf16,fp8"
        reserve_help = (f"Share of GPU memory held back, in [0, 1), under the theoretical rule (default {_D['reserve']});"
                        " an engine's rule sizes its pool by its own settings.")
        kv_cache_memory_help = "KV pool per GPU given directly (53GB, 40GiB), in place of --reserve: not both."
    else:
        model = click.option("--model", help="Model name (see `kvreg model list`).")
        gpu = click.option("--gpu", help="GPU name (see `kvreg gpu list`).")
        context_help = "Max context per sequence (max_model_len): 128K = 131,072, 128k = 128,000."
        kv_dtype_help = None  # the declared help
        reserve_help = (f"Share of GPU memory held back, in [0, 1) (default {_D['reserve']})"
                        + ("." if defaults else "; switches the plan from --kv-cache-memory back to the reserve."))
        kv_cache_memory_help = ("KV pool per GPU given directly (53GB, 40GiB), as vLLM's kv_cache_memory_bytes; not "
                                "with --reserve" + ("." if defaults else "; none clears it."))
    opts = [
        model,
        gpu,
        input_option("gpus_per_node", default=d(_D["gpus_per_node"]), show_default=defaults),
        input_option("tp", type=None, default=d(tp), show_default=defaults,
                     help=f"Tensor-parallel size, or auto ({tp_auto})"),
        input_option("pp", default=d(_D["pp"]), show_default=defaults),
        input_option("dp_attention", default=d(_D["dp_attention"]), show_default=defaults),
        input_option("kv_dtype", default=d(INPUTS["kv_dtype"].default), show_default=defaults, help=kv_dtype_help),
        click.option("--weight-dtype", default=d("native"), show_default=defaults,
                     help="Weight dtype, or native (the model's own)."),
    ]
    if context:
        opts.append(input_option("context_tokens", type=None, default=d(format_tokens(_D["context_tokens"])),
                                 show_default=defaults, help=context_help))
    if workload:
        opts += [
            input_option("avg_tokens", type=None, suffix="" if defaults else "; none clears it"),
            click.option("--workload", multiple=True, metavar="CLASS=TOKENS:SHARE[:IN/OUT[:TPOT/TTFT]]",
                         help="A request class of a workload mix, repeatable: --workload chat=1500:0.8 --workload "
                         "docs=13000:0.2 (or both comma-separated in one). Shares are relative weights (80% works); "
                         "replaces --avg-tokens. Optional: the class's prompt/output tokens and its tpot/ttft targets "
                         "in ms (- for none): chat=1500:0.8:1000/500:50/2000"
                         + ("." if defaults else "; none clears the mix.")),
        ]
    opts += [
        # no default of its own: a reserve given is told from --kv-cache-memory given
        input_option("reserve", type=None, default=None, help=reserve_help),
        input_option("kv_cache_memory_bytes", type=None, default=None, help=kv_cache_memory_help),
        input_option("block_size", default=d(_D["block_size"]), show_default=defaults),
        *engine_options(defaults),
    ]
    if notes:
        opts.append(click.option("--notes", help="Free text."))
    if not many:  # a deployment input declared since: an option of its own (plan add, plan set, the plan form)
        opts.insert(0, declared_options(("deployment",), handled=DEPLOYMENT_HANDLED, defaults=defaults))

    def decorate(fn):
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


# The deployment inputs that take no generated option where deployment_options places none of its own: the context
# and the average request, which some commands do not ask (context=False, workload=False), and engine_release,
# derived from --engine-version. The others it places (input_option), so declared_options knows them.
DEPLOYMENT_HANDLED = ("context_tokens", "avg_tokens", "engine_release")


def latency_options():
    """The workload a latency is asked for (`kvreg capacity`): request lengths, concurrency, targets, each generated
    from its input's declaration (flag; help, but where the question words what it adds to its answer)."""
    opts = [
        input_option("input_tokens", type=None, help="Prompt tokens of a request (1024, 8k): adds tpot_ms, ttft_ms and"
                     " tokens/s per GPU; the context defaults to input + output tokens, and must hold them"),
        input_option("output_tokens", type=None, help="Tokens a request generates; goes with --input-tokens"),
        input_option("concurrency", type=None),
        input_option("tpot_target_ms", type=None, help="Target time per output token in ms: adds"
                     " max_concurrency_within_slo and binding_constraint (memory or latency)"),
        input_option("ttft_target_ms", type=None),
    ]
    return _all(opts)


# The workload inputs a plan takes by the options plan_latency_options places: its request lengths and targets. Not
# the concurrency: a plan's users per replica are what its figures solve for (kvreg.app.plans.LATENCY_FIELDS).
PLAN_LATENCY = ("input_tokens", "output_tokens", "tpot_target_ms", "ttft_target_ms")


def plan_latency_options(*, defaults: bool):
    """A plan's latency workload (`plan add`, `plan set`): request lengths and targets, each generated from its input's
    declaration, then any workload input declared since (declared_options). No concurrency: a plan's users per
    replica are what its figures solve for, the smaller of the memory and the latency limits. Without defaults
    (plan set) an option left out keeps the stored value, and none clears one."""
    clears = "" if defaults else "; none clears it"
    opts = [
        declared_options(("workload",), handled=("concurrency",), defaults=defaults),
        *[input_option(name, suffix=clears, type=None) for name in PLAN_LATENCY],
    ]
    return _all(opts)


def _all(opts: list):
    """One decorator applying `opts` in order."""

    def decorate(fn):
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


# The questions both front ends ask: `kvreg capacity` (the what-if page) and `kvreg plan add` (its form).
_capacity_deployment = deployment_options(
    defaults=True, many=True, notes=False, workload=False,
    tp_auto="the smallest valid TP in the node at which a replica holds one whole sequence: fits = 1")
_capacity_latency = latency_options()


# The workload inputs latency_options gives by options of their own (--input-tokens 8k, --tpot-ms).
WORKLOAD_HANDLED = ("input_tokens", "output_tokens", "concurrency", "tpot_target_ms", "ttft_target_ms")
# A deployment or workload input declared since: an option of its own on `kvreg capacity` and the what-if page.
_capacity_declared = declared_options(("deployment", "workload"), handled=DEPLOYMENT_HANDLED + WORKLOAD_HANDLED)


def capacity_options(fn):
    """`kvreg capacity`'s options: one deployment's (as lists), then the latency workload's, then any deployment or
    workload input declared since (declared_options)."""
    return _capacity_declared(_capacity_deployment(_capacity_latency(fn)))


_plan_deployment = deployment_options(defaults=True)
_plan_latency = plan_latency_options(defaults=True)


def plan_add_options(fn):
    """`kvreg plan add`'s options: the deployment's, then its latency workload's."""
    return _plan_deployment(_plan_latency(fn))


def request_command(name: str, options, arguments: tuple[str, ...] = ()) -> click.Command:
    """A command wearing `options` (and taking `arguments`) that does nothing: what a query or form
    is parsed with (`parse`). `name` is the CLI command's, for the messages."""

    def params(**kwargs):
        return kwargs

    params = options(params)
    for argument in reversed(arguments):
        params = click.argument(argument)(params)
    return click.command(name)(params)


CAPACITY = request_command("capacity", capacity_options)
PLAN_ADD = request_command("add", plan_add_options, ("name",))

# --------------------------------------------------------------------------- reading a query or form


# Never read from a query or form: --format picks the CLI's output (the API always answers json)
# and --help would print to the server's terminal.
_NOT_OPTIONS = frozenset({"format", "help"})


def option_names(command: click.Command) -> dict[str, click.Option]:
    """A command's options by long name without the dashes: {'kv-dtype': <Option>, ...}."""
    names = {}
    for p in command.params:
        if isinstance(p, click.Option):
            for o in p.opts:
                if o.startswith("--") and o[2:] not in _NOT_OPTIONS:
                    names[o[2:]] = p
    return names


def given(items, command: click.Command, *, ignore: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """The (name, value) pairs of a query or form that set one of the command's options, in order.

    An empty value means "not given" (the option's default), as an empty form field does. A name
    the command does not know is an error naming the ones it does.
    """
    known = option_names(command)
    out = []
    for key, value in items:
        if key in ignore:
            continue
        if key not in known:
            raise KvregError(f"unknown option {key!r}: use one of {', '.join(sorted(known))} "
                             f"(the options of `kvreg {command.name}`)")
        value = str(value).strip()
        if value:
            out.append((key, value))
    return out


def parse(command: click.Command, pairs: list[tuple[str, str]], arguments: tuple[str, ...] = ()) -> dict:
    """The command's parameters as its function receives them, parsed by click from the pairs."""
    argv = list(arguments)
    for key, value in pairs:
        argv += [f"--{key}", value]
    try:
        ctx = command.make_context(command.name, argv, resilient_parsing=False)
    except click.UsageError as exc:
        raise KvregError(exc.format_message()) from None
    params = dict(ctx.params)
    params.pop("fmt", None)
    return params


def command_line(words: list[str], pairs: list[tuple[str, str]]) -> str:
    """The shell command that asks the same question: `kvreg capacity --model ... --context ...`."""
    # lazy: start-up time of every CLI command that wears these options; only the web page quotes
    import shlex

    parts = list(words)
    for key, value in pairs:
        parts += [f"--{key}", shlex.quote(value)]
    return " ".join(parts)


def query(pairs: list[tuple[str, str]], **replace: str) -> str:
    """The pairs as a query string, with some options replaced (keys as option names)."""
    # lazy: start-up time of every CLI command that wears these options; only the web page writes queries
    from urllib.parse import urlencode

    out = [(k, v) for k, v in pairs if k not in replace]
    out += [(k, v) for k, v in replace.items() if v]
    return urlencode(out)
