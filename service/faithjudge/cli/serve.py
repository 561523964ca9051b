"""``faithjudge serve`` (the REST service) and ``faithjudge keys create|list|revoke`` (API keys).

Registered on the main app by ``register(app)``. Without any API key the service answers
everyone as one tenant, so it binds to loopback only; binding elsewhere without keys is refused
unless ``--insecure-no-auth`` says that is intended.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from faithjudge.api.keys import is_loopback
from faithjudge.cli.common import err, fail, renamed_option, settings_from
from faithjudge.errors import FaithJudgeError
from faithjudge.judges import judge_help

if TYPE_CHECKING:
    from faithjudge.settings import Settings

__all__ = ["register"]

keys_app = typer.Typer(help="Manage API keys (stored as sha256 hashes).", no_args_is_help=True)


async def check_job_store(settings: Settings) -> None:
    """Open (and migrate) the job store once before serving, so that a wrong URL or a database
    that is down ends ``serve`` with one line naming the cause, not a lifespan traceback."""
    import anyio
    from sqlalchemy.engine import make_url

    from faithjudge.jobs.interface import open_job_store

    url = settings.job_store_url
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:
        shown = url.split("@")[-1]
    try:
        with anyio.fail_after(30):
            store = await open_job_store(url, schema=settings.database_schema)
    except Exception as exc:
        cause = str(exc).splitlines()[0][:300] if str(exc) else ""
        raise FaithJudgeError(
            f"cannot open the job store at {shown}: {type(exc).__name__}: {cause}".rstrip(": ")
        ) from None
    await store.close()


async def check_judges(settings: Settings) -> None:
    """Build every offered judge once before serving: an unknown backend or a missing setting
    ends ``serve`` with one line naming it, not a lifespan traceback."""
    from faithjudge.pipeline.runtime import open_scorers

    async with open_scorers(settings):
        pass


def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8000).")] = None,
    judge: Annotated[str | None, typer.Option(help=judge_help())] = None,
    evaluator: Annotated[str | None, typer.Option(hidden=True, help="Deprecated: --judge.")] = None,
    judges: Annotated[
        str | None,
        typer.Option(
            help="Offer several judges, comma-separated (lexicon:v1,openai:MODEL); the first "
            "is the default. Each job keeps the judge it was uploaded under."
        ),
    ] = None,
    evaluators: Annotated[
        str | None, typer.Option(hidden=True, help="Deprecated: --judges.")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Cache, SQLite job store and keys file.")
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="postgresql+asyncpg://... (default: SQLite in data dir).")
    ] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Judge calls in flight.")] = None,
    cache: Annotated[bool | None, typer.Option("--cache/--no-cache")] = None,
    workers: Annotated[
        bool | None, typer.Option("--workers/--no-workers", help="Score jobs in this process.")
    ] = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option("--insecure-no-auth", help="Allow a non-loopback bind without API keys."),
    ] = False,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error.")] = "info",
) -> None:
    """Run the REST service (OpenAPI docs at /docs)."""
    judge = renamed_option(judge, evaluator, "--judge", "--evaluator")
    judges = renamed_option(judges, evaluators, "--judges", "--evaluators")
    import uvicorn

    from faithjudge.api.app import create_app
    from faithjudge.api.keys import KeyRing
    from faithjudge.event_loop import run_async

    try:
        settings = settings_from(
            host=host,
            port=port,
            judge=judge,
            # --judge alone means that judge alone, whatever FAITHJUDGE_JUDGES says
            judges="" if judge is not None and judges is None else judges,
            data_dir=data_dir,
            database_url=database_url,
            concurrency=concurrency,
            cache=cache,
            workers=workers,
        )
        if insecure_no_auth:
            settings = settings.model_copy(update={"insecure_no_auth": True})
        keys = KeyRing.from_settings(settings)
        if not keys.configured and not is_loopback(settings.host):
            if not settings.insecure_no_auth:
                raise FaithJudgeError(
                    f"refusing to serve on {settings.host} without API keys: create one with "
                    "`faithjudge keys create --tenant NAME`, bind to 127.0.0.1, or pass "
                    "--insecure-no-auth"
                )
            err.print(
                f"[yellow]warning:[/yellow] serving on {settings.host} with NO authentication"
            )
        app = create_app(settings)
        run_async(check_judges, settings)
        run_async(check_job_store, settings)
    except FaithJudgeError as exc:
        raise fail(exc) from None
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        http="httptools" if importlib.util.find_spec("httptools") else "h11",
        log_level=log_level.lower(),
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=10,
    )


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="The tenant the key acts for.")],
    data_dir: Annotated[Path | None, typer.Option(help="Where api_keys.json lives.")] = None,
    keys_file: Annotated[Path | None, typer.Option(help="The keys file to add to.")] = None,
) -> None:
    """Create an API key: it is printed once; only its sha256 is stored."""
    from faithjudge.api.keys import create_key

    try:
        settings = settings_from(data_dir=data_dir, api_keys_file=keys_file)
        key = create_key(settings.keys_path, tenant)
    except FaithJudgeError as exc:
        raise fail(exc) from None
    err.print(f"key for tenant {tenant!r} added to {settings.keys_path} (store it now)")
    typer.echo(key)


@keys_app.command("list")
def keys_list(
    data_dir: Annotated[Path | None, typer.Option(help="Where api_keys.json lives.")] = None,
    keys_file: Annotated[Path | None, typer.Option(help="The keys file to read.")] = None,
) -> None:
    """List the keys of the keys file: id, prefix, tenant, created, revoked (never a key)."""
    from faithjudge.api.keys import list_keys

    try:
        settings = settings_from(data_dir=data_dir, api_keys_file=keys_file)
        keys = list_keys(settings.keys_path)
    except FaithJudgeError as exc:
        raise fail(exc) from None
    if not keys:
        err.print(f"no keys in {settings.keys_path}")
    rows = [("id", "prefix", "tenant", "created", "revoked")]
    rows += [
        (k.id, k.prefix or "-", k.tenant, k.created_at or "-", k.revoked_at or "-") for k in keys
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows if keys else ():
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    if settings.api_keys is not None:
        err.print("keys given in FAITHJUDGE_API_KEYS are not in the file and not listed")


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID", help="The id `keys list` shows.")],
    data_dir: Annotated[Path | None, typer.Option(help="Where api_keys.json lives.")] = None,
    keys_file: Annotated[Path | None, typer.Option(help="The keys file to change.")] = None,
) -> None:
    """Revoke a key: the service refuses it (401) from its next read of the keys file."""
    from faithjudge.api.keys import revoke_key

    try:
        settings = settings_from(data_dir=data_dir, api_keys_file=keys_file)
        info, now = revoke_key(settings.keys_path, key_id)
    except FaithJudgeError as exc:
        raise fail(exc) from None
    if now:
        err.print(f"key {info.id} of tenant {info.tenant!r} revoked in {settings.keys_path}")
    else:
        err.print(
            f"key {info.id} of tenant {info.tenant!r} was already revoked ({info.revoked_at})"
        )


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.add_typer(keys_app, name="keys")
