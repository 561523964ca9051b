"""``/docs`` works without network access: Swagger UI comes from the package, not a CDN."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from faithjudge.api.app import SWAGGER_UI_PREFIX, create_app
from faithjudge.settings import Settings

STATIC = Path(__file__).resolve().parents[2] / "service" / "faithjudge" / "api" / "static"


def _client(tmp_path: Path) -> httpx.AsyncClient:
    # the page and its assets need neither the store nor the scorer: no lifespan
    app = create_app(Settings(data_dir=tmp_path / "data", workers=False))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fj")


@pytest.mark.anyio
async def test_docs_reference_only_local_assets_and_they_are_served(tmp_path: Path) -> None:
    async with _client(tmp_path) as client:
        page = await client.get("/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        html = page.text
        assert "SwaggerUIBundle" in html and "url: '/openapi.json'" in html
        # no absolute URL at all: nothing would load on a machine without network access
        assert not re.search(r"(https?:)?//", html), html
        assets = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert sorted(assets) == sorted(
            f"{SWAGGER_UI_PREFIX}/{name}"
            for name in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")
        )
        kinds = {}
        for url in assets:
            asset = await client.get(url)
            assert asset.status_code == 200, url
            kinds[url.rsplit(".", 1)[1]] = (asset.headers["content-type"], asset.content)
        js_type, js = kinds["js"]
        assert "javascript" in js_type and b"SwaggerUIBundle" in js and len(js) > 500_000
        css_type, css = kinds["css"]
        assert css_type.startswith("text/css") and b".swagger-ui" in css
        assert kinds["png"][0] == "image/png"
        # the UI reads the document from the app itself, which serves it
        document = await client.get("/openapi.json")
        assert document.status_code == 200 and document.json()["info"]["title"] == "FaithJudge"
        # ReDoc exists only as a CDN script: not offered rather than blank
        assert (await client.get("/redoc")).status_code == 404


def test_the_vendored_swagger_ui_keeps_its_licence_and_names_its_source() -> None:
    folder = STATIC / "swagger-ui"
    assert "Apache License" in (folder / "LICENSE").read_text(encoding="utf-8")
    assert (folder / "NOTICE").read_text(encoding="utf-8").startswith("swagger-ui")
    assert "swagger-ui-dist 5." in (folder / "SOURCE").read_text(encoding="utf-8")
