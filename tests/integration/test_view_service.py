"""``faithjudge view --service``: a real service's jobs listed, opened and compared beside a
folder's runs, over HTTP against the viewer (no browser).

The service is the real app served on loopback with the offline lexicon judge; the demo job is
submitted and waited for through the SDK, as ``faithjudge submit`` does.
"""

from __future__ import annotations

import http.client
import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from faithjudge.api.app import create_app
from faithjudge.cli.view import make_server
from faithjudge.settings import Settings
from faithjudge_client import FaithJudgeClient
from faithjudge_client.lines import ItemResult, MetricResult

from tests.fixtures_service import free_port, serve_in_thread

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.jsonl"
KEY = "fj_test_key_viewer"


@contextmanager
def viewing(folder: Path, service: str, api_key: str | None) -> Iterator[int]:
    served = make_server(folder, [], 0, service=service, api_key=api_key)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        yield served.server_address[1]
    finally:
        served.shutdown()
        served.server_close()
        thread.join(10)


def _get(port: int, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[str]:
    settings = Settings(data_dir=tmp_path / "data", api_keys=json.dumps({KEY: "tenant"}))
    with serve_in_thread(create_app(settings)) as url:
        yield url


def test_the_index_lists_the_jobs_and_a_job_opens_and_compares_like_a_file(
    service: str, tmp_path: Path
) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(DEMO, folder / "demo.jsonl")  # the request file the CoTs come from
    with FaithJudgeClient(service, KEY) as client:
        job = client.submit_job(DEMO, name="demo on the service")
        assert client.wait(job.id, timeout=60).status == "completed"
        client.download_results(job.id, folder / "local.jsonl")
    item_ids = [json.loads(line)["item_id"] for line in DEMO.read_text().splitlines()]

    with viewing(folder, service, KEY) as port:
        status, index = _get(port, "/")
        assert status == 200
        assert 'id="jobs"' in index and "<h2>Jobs of" in index and job.id in index
        assert "demo on the service" in index and "completed" in index
        assert f'value="job:{job.id}"' in index  # pickable for a comparison
        assert "local.jsonl" in index  # the folder's run still listed

        status, page = _get(port, f"/run?file=job:{job.id}")
        assert status == 200 and f"job:{job.id}" in page
        assert all(item_id in page for item_id in item_ids)
        assert "No request file of the folder" not in page  # CoTs found in demo.jsonl

        status, page = _get(port, f"/compare?base=local.jsonl&cand=job:{job.id}")
        assert status == 200 and 'id="changed-count">0 of' in page

        status, page = _get(port, "/run?file=job:b_nosuchjob")
        assert status == 404 and "on the service" in page


def test_the_older_batch_prefix_still_opens_a_job(service: str, tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    with FaithJudgeClient(service, KEY) as client:
        job = client.submit_job(DEMO, name="older links")
        assert client.wait(job.id, timeout=60).status == "completed"
        client.download_results(job.id, folder / "local.jsonl")

    with viewing(folder, service, KEY) as port:
        status, page = _get(port, f"/run?file=batch:{job.id}")
        assert status == 200 and f"job:{job.id}" in page
        status, page = _get(port, f"/compare?base=local.jsonl&cand=batch:{job.id}")
        assert status == 200 and 'id="changed-count">0 of' in page
        status, page = _get(port, "/run?file=batch:b_nosuchjob")
        assert status == 404 and "on the service" in page


def test_a_service_that_cannot_be_reached_is_one_line_and_the_runs_stay(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    result = ItemResult(
        line=1,
        item_id="i1",
        metrics={"clinical_fidelity": MetricResult(status="valid", score=4, normalized=0.75)},
    )
    (folder / "kept.jsonl").write_text(result.model_dump_json() + "\n")
    gone = f"http://127.0.0.1:{free_port()}"
    with viewing(folder, gone, None) as port:
        status, index = _get(port, "/")
        assert status == 200
        assert index.count('id="service-problem"') == 1
        assert f"could not list the jobs of {gone}" in index
        assert "Traceback" not in index and 'id="jobs"' not in index
        assert "kept.jsonl" in index
        status, page = _get(port, "/run?file=job:b_0123")
        assert status == 500 and "Traceback" not in page
