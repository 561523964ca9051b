"""``faithjudge view [DIR]``: the runs of a folder in the browser, served on 127.0.0.1.

``/`` lists every results file of the folder (judge, lines, coverage, metric means, date),
``/run?file=NAME`` explores every item of one (the HTML report's explorer: search, filters and
opened items live in the URL's fragment), ``/compare?base=A&cand=B`` compares two item by item.
Nothing is fetched from anywhere else: the pages are served by this command with their scripts
inline. The server answers only requests addressed to the loopback name it listens on, so a
web page elsewhere cannot read the results through a name that resolves to this machine.

With ``--service URL`` the index also lists that service's jobs (through the SDK, with the
API key ``faithjudge submit`` uses); ``/run?file=job:ID`` fetches a job's results and explores
them as a file run, and a completed job is compared with a file run like two files. The older
``batch:ID`` names the same job.
A service that cannot be reached is said in one line of the index; the folder's runs stay.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import parse_qs, urlsplit

import typer

from faithjudge.cli.common import err, fail

if TYPE_CHECKING:
    from faithjudge_client import FaithJudgeClient

    from faithjudge.reports.browser import Comparison, JobListing, Run, RunFolder

__all__ = ["DEFAULT_PORT", "make_server", "register"]

DEFAULT_PORT = 8765
HOST = "127.0.0.1"
# The newest jobs listed: one page of ``GET /v1/jobs`` at its largest.
JOBS_LISTED = 200
# The index waits on the service this long at most; a job's results may take longer.
LIST_TIMEOUT_S = 5.0
_JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


class ServiceJobs:
    """The jobs of a FaithJudge service, read through the SDK.

    An opened job's results are downloaded into a private cache folder, read there as a run
    of its own ``RunFolder`` (named ``job:<id>``, so a file run and a job never share a
    name); a completed job is downloaded once, an unfinished one again on every visit.
    """

    def __init__(self, client: FaithJudgeClient, requests: RunFolder) -> None:
        from faithjudge.reports.browser import RunFolder

        self.client = client
        self._cache = tempfile.TemporaryDirectory(prefix="faithjudge-view-")
        self.runs = RunFolder(Path(self._cache.name))
        self._requests = requests
        self._fetched: set[str] = set()
        self._lock = threading.Lock()

    def close(self) -> None:
        self.client.close()
        self._cache.cleanup()

    def listing(self) -> JobListing:
        from faithjudge.errors import FaithJudgeError
        from faithjudge.reports.browser import JobListing, JobSummary

        url = self.client.base_url
        try:
            page = self.client.jobs(limit=JOBS_LISTED)
        except FaithJudgeError as exc:
            return JobListing(url, problem=f"could not list the jobs of {url}: {exc}")
        jobs = [
            JobSummary(
                id=j.id,
                name=j.name,
                status=j.status,
                judge=j.judge,
                lines=j.total,
                created=j.created_at.timestamp(),
            )
            for j in page.items
        ]
        return JobListing(url, jobs, more=bool(page.next_cursor))

    def fetch(self, name: str) -> str:
        """The run name in ``self.runs`` of the job run ``name`` (``job:<id>``, or the older
        ``batch:<id>``), its results downloaded.

        Raises:
            KeyError: no such job.
            FaithJudgeError: the service cannot be reached, or refuses.
        """
        from faithjudge_client import NotFound

        from faithjudge.errors import FaithJudgeError
        from faithjudge.reports.browser import JOB_PREFIX, service_job_id

        job_id = service_job_id(name)
        if job_id is None or not _JOB_ID.fullmatch(job_id):
            raise KeyError(name)
        # one cached run per job, whichever prefix the link used
        run = JOB_PREFIX + job_id
        with self._lock:
            if run not in self._fetched:
                try:
                    status = self.client.job(job_id)
                except NotFound:
                    raise KeyError(name) from None
                written = self.client.download_results(job_id, self.runs.folder / run)
                if not written:
                    raise FaithJudgeError(f"job {job_id} has no result yet ({status.status})")
                if status.terminal:
                    self._fetched.add(run)
        # CoTs are looked for in the request files of the viewed folder, as for a file run
        self.runs.requests = self._requests.request_files()
        return run


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], folder: RunFolder, service: ServiceJobs | None = None
    ) -> None:
        super().__init__(address, _Handler)
        self.folder = folder
        self.service = service
        self.compared: dict[tuple[str, str], tuple[Run, Run, Comparison]] = {}
        self.compare_lock = threading.Lock()

    def server_close(self) -> None:
        super().server_close()
        if self.service is not None:
            self.service.close()

    def source(self, name: str) -> tuple[RunFolder, str]:
        """Where the run ``name`` is read: the folder, or a job's fetched results."""
        from faithjudge.reports.browser import service_job_id

        if self.service is not None and service_job_id(name) is not None:
            return self.service.runs, self.service.fetch(name)
        return self.folder, name

    def run(self, name: str) -> Run:
        runs, key = self.source(name)
        return runs.run(key)

    def comparison(self, base: str, cand: str) -> Comparison:
        """The comparison of two runs, computed again only when either file changed."""
        from faithjudge.reports.browser import compare_items

        base_run, cand_run = self.run(base), self.run(cand)
        with self.compare_lock:
            known = self.compared.get((base, cand))
            if known is not None and known[0] is base_run and known[1] is cand_run:
                return known[2]
            comparison = compare_items(base_run.items, cand_run.items)
            self.compared[(base, cand)] = (base_run, cand_run, comparison)
            return comparison


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "faithjudge-view"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a page view is no news."""

    def _send(self, status: HTTPStatus, page: str, *, policy: str | None = None) -> None:
        body = page.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        if policy is not None:
            self.send_header("Content-Security-Policy", policy)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _problem(self, status: HTTPStatus, message: str) -> None:
        import html

        from faithjudge.reports.render_browser import page_policy

        page = (
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>FaithJudge view"
            f"</title></head><body><p>{html.escape(message)}</p><p><a href='/'>All runs</a>"
            "</p></body></html>"
        )
        self._send(status, page, policy=page_policy())

    def _addressed_here(self) -> bool:
        port = self.server.server_address[1]
        host = (self.headers.get("Host") or "").lower()
        return host in {f"{HOST}:{port}", f"localhost:{port}", HOST, "localhost"}

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        from faithjudge.errors import FaithJudgeError
        from faithjudge.reports import render_browser as pages
        from faithjudge.reports.browser import service_job_id

        if not self._addressed_here():
            self._problem(HTTPStatus.FORBIDDEN, "this server answers only 127.0.0.1")
            return
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        folder = self.server.folder
        try:
            if url.path == "/":
                service = self.server.service
                jobs = None if service is None else service.listing()
                page = pages.index_page(str(folder.folder), folder.listing(), jobs)
                self._send(HTTPStatus.OK, page, policy=pages.page_policy())
            elif url.path == "/run":
                name = self._required(query, "file")
                if name is None:
                    return
                runs, key = self.server.source(name)
                run = runs.run(key)
                self._send(HTTPStatus.OK, pages.run_page(run, runs.explorer(key)))
            elif url.path == "/compare":
                base, cand = self._required(query, "base"), self._required(query, "cand")
                if base is None or cand is None:
                    return
                comparison = self.server.comparison(base, cand)
                page = pages.compare_page(base, cand, comparison, query.get("change"))
                self._send(HTTPStatus.OK, page, policy=pages.page_policy())
            else:
                self._problem(HTTPStatus.NOT_FOUND, f"no page at {url.path}")
        except KeyError as exc:
            name = str(exc.args[0])
            job = self.server.service is not None and service_job_id(name) is not None
            where = "on the service" if job else f"in {folder.folder}"
            self._problem(HTTPStatus.NOT_FOUND, f"no results file {name!r} {where}")
        except FaithJudgeError as exc:
            self._problem(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))

    def _required(self, query: dict[str, str], name: str) -> str | None:
        value = query.get(name)
        if not value:
            what = ": pick a baseline and a candidate run" if name in ("base", "cand") else ""
            self._problem(HTTPStatus.BAD_REQUEST, f"the query parameter {name!r} is missing{what}")
        return value or None


def make_server(
    folder: Path,
    requests: list[Path],
    port: int = DEFAULT_PORT,
    *,
    service: str | None = None,
    api_key: str | None = None,
) -> _Server:
    """The viewer's server on 127.0.0.1:``port`` (0: any free port), not yet serving; with
    ``service`` (a base URL) it also lists and opens that service's jobs.

    Raises:
        OSError: the port cannot be bound.
    """
    import httpx
    from faithjudge_client import FaithJudgeClient, RetryPolicy

    from faithjudge.reports.browser import RunFolder

    runs = RunFolder(folder, requests)
    jobs = None
    if service is not None:
        # a page waits on the service: no retries, and a short wait to connect
        client = FaithJudgeClient(
            service,
            api_key,
            timeout=httpx.Timeout(60.0, connect=LIST_TIMEOUT_S),
            retry=RetryPolicy(max_retries=0),
        )
        jobs = ServiceJobs(client, runs)
    try:
        return _Server((HOST, port), runs, jobs)
    except OSError:
        if jobs is not None:
            jobs.close()
        raise


def view_command(
    folder: Annotated[
        Path, typer.Argument(metavar="[DIR]", help="The folder of results files (default: here).")
    ] = Path("."),
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: any free one).")
    ] = DEFAULT_PORT,
    requests: Annotated[
        list[Path] | None,
        typer.Option(
            "--requests",
            metavar="FILE",
            help="A request file whose CoTs to show and search, besides those of DIR "
            "(repeatable); each run takes the one that holds its lines.",
        ),
    ] = None,
    service: Annotated[
        str | None,
        typer.Option(
            "--service",
            metavar="URL",
            help="Also list this FaithJudge server's jobs, open and compare them.",
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="FAITHJUDGE_API_KEY",
            help="API key for --service (sent as a Bearer token).",
            show_envvar=True,
        ),
    ] = None,
) -> None:
    """Browse the runs of a folder: list, explore every item, compare two (local, offline)."""
    if not folder.is_dir():
        raise fail(f"{folder} is not a folder")
    for path in requests or []:
        if not path.is_file():
            raise fail(f"--requests {path}: no such file")
    from faithjudge.errors import FaithJudgeError

    try:
        server = make_server(folder, list(requests or []), port, service=service, api_key=api_key)
    except FaithJudgeError as exc:  # a --service that is no URL
        raise fail(f"--service: {exc}") from None
    except OSError as exc:
        raise fail(
            f"cannot listen on {HOST}:{port}: {exc.strerror or exc} (choose another --port)"
        ) from None
    bound = server.server_address[1]
    err.print(f"serving the runs of {folder} at http://{HOST}:{bound}/ (Ctrl-C stops)",
              highlight=False, markup=False)  # fmt: skip
    with server, contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


def register(app: typer.Typer) -> None:
    app.command("view")(view_command)
