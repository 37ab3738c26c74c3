"""`kvreg serve`: the registry as a local web page (kvreg.web).

The web layer's own command: the CLI names it in its command table (kvreg.cli) and never imports the web
layer, nor the web layer the CLI, so this command reports a user's error as one line itself.
"""

from __future__ import annotations

import click


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. The default is reachable from this machine only; 0.0.0.0 opens the "
              "page (and, with --allow-writes, its forms) to the network.")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="TCP port.")
@click.option("--allow-writes", is_flag=True,
              help="Add the forms that add a plan and set demand (CSRF-protected, one transaction each). "
              "Without it the page is read-only and refuses every POST.")
@click.pass_context
def serve_cmd(ctx, host, port, allow_writes):
    """Serve a what-if page, the registry's tables, plans and procurement in the browser.

    The page computes nothing itself: every figure comes from the views, as the CLI prints it, and
    GET /api/capacity?model=...&gpu=...&context=... returns exactly what `kvreg capacity --format json`
    prints for the same options. Stop it with Ctrl-C.

    Example: kvreg serve --port 8765, then open http://127.0.0.1:8765/
    """
    import socket

    # Lazy: uvicorn and Starlette load only for this command.
    import uvicorn

    from kvreg.core.errors import user_error_types
    from kvreg.web.app import App, is_loopback

    # Bind first: a port in use is one line, before the registry is opened or anything is printed.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another with --port") from None
    try:
        app = App(ctx.find_root().obj.get("db_url"), allow_writes=allow_writes, host=host)
    except user_error_types() as exc:  # a registry that cannot be opened: one line, as every command says it
        sock.close()
        raise click.ClickException(" ".join(str(exc).split())) from None
    except BaseException:
        sock.close()
        raise
    shown = f"[{host}]" if ":" in host else host
    where = ("only this machine can reach it" if is_loopback(host)
             else "other machines can reach it: anyone on the network can read the registry")
    click.echo(f"kvreg serve: http://{shown}:{port}/ (listening on {host}: {where})")
    click.echo(f"registry: {app.masked_url}; "
               + ("writes allowed: the page can add plans and set demand" if allow_writes
                  else "read-only (--allow-writes adds the plan and demand forms)"))
    click.echo("Ctrl-C stops it.")
    # ws="none": the page uses no websockets, and uvicorn's default imports a websocket library at start-up
    # (wsproto or websockets: 20-30 ms of the under-a-second start).
    config = uvicorn.Config(app.starlette(), log_level="warning", access_log=False, lifespan="off", ws="none")
    server = uvicorn.Server(config)
    app.warm_up_later()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        app.close()
