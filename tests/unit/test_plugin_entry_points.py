"""Registries read the entry points of installed packages, lazily, and name a broken one.

A package is "installed" here as a ``*.dist-info`` folder (metadata and ``entry_points.txt``)
beside its module on ``sys.path``: what ``importlib.metadata`` reads for a package pip put there.
Each test uses a group of its own, so the service's registries never see these packages.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from faithjudge.errors import ConfigError
from faithjudge.judges import (
    JUDGES,
    is_batch_route,
    live_spec,
    make_judge,
    register_judge,
)
from faithjudge.settings import Settings
from faithjudge_client.registry import (
    PluginError,
    PluginWarning,
    Registry,
    UnknownName,
    refresh_plugins,
)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty folder on ``sys.path``; packages written into it count as installed."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    refresh_plugins()
    yield folder
    refresh_plugins()


def _install(site: Path, dist: str, entry_points: str, modules: dict[str, str]) -> None:
    info = site / f"{dist.replace('-', '_')}-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text(entry_points)
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source)
    refresh_plugins()


def test_an_installed_entry_is_listed_without_import_and_loaded_on_use(site: Path) -> None:
    _install(
        site,
        "fj-widgets",
        "[fj.test.widgets]\nspanner = fj_widgets_mod:SPANNER\n",
        {"fj_widgets_mod": "SPANNER = ('a', 'spanner')\n"},
    )
    registry: Registry[object] = Registry("widget", group="fj.test.widgets")
    registry.register("hammer", "json:dumps")
    assert registry.names() == ("hammer", "spanner")  # code first, then installed packages
    assert "fj_widgets_mod" not in sys.modules
    point = registry.plugin("spanner")
    assert point is not None and point.dist is not None and point.dist.name == "fj-widgets"
    assert registry.plugin("hammer") is None and registry.ref("spanner") == "fj_widgets_mod:SPANNER"
    assert registry.get("spanner") == ("a", "spanner") and "fj_widgets_mod" in sys.modules


def test_a_broken_entry_point_names_its_package_only_where_it_is_used(site: Path) -> None:
    _install(
        site,
        "fj-broken",
        "[fj.test.broken]\n"
        "gone = fj_no_such_module:thing\n"
        "crash = fj_crashing_mod:thing\n"
        "wrong = fj_wrong_mod:thing\n",
        {
            "fj_crashing_mod": "raise RuntimeError('the plugin fails at import')\n",
            "fj_wrong_mod": "thing = 42\n",
        },
    )

    def adapt(_name: str, found: object) -> object:
        if not callable(found):
            raise TypeError(f"names a {type(found).__name__}, not a function")
        return found

    registry: Registry[object] = Registry("gizmo", group="fj.test.broken", adapt=adapt)
    assert registry.names() == ("gone", "crash", "wrong")  # listing never fails
    with pytest.raises(PluginError) as gone:
        registry.get("gone")
    message = str(gone.value)
    assert "gizmo 'gone' from the installed package fj-broken 1.2" in message
    assert "gone = fj_no_such_module:thing in group fj.test.broken" in message
    assert "ModuleNotFoundError" in message
    with pytest.raises(
        PluginError, match=r"crash = fj_crashing_mod:thing.*RuntimeError: the plugin"
    ):
        registry.get("crash")
    with pytest.raises(PluginError, match=r"wrong = fj_wrong_mod:thing.*names a int, not a func"):
        registry.get("wrong")
    with pytest.raises(UnknownName, match="known: gone, crash, wrong"):
        registry.get("other")


def test_a_name_registered_in_code_wins_over_an_entry_point(site: Path) -> None:
    _install(
        site,
        "fj-rival",
        "[fj.test.rival]\nshared = json:loads\nown = json:loads\n",
        {},
    )
    early: Registry[object] = Registry("part", group="fj.test.rival")
    early.register("shared", "json:dumps")
    with pytest.warns(PluginWarning, match="part 'shared' of the installed package fj-rival 1.2"):
        assert early.names() == ("shared", "own")
    import json

    assert early.get("shared") is json.dumps
    late: Registry[object] = Registry("part", group="fj.test.rival")
    assert late.names() == ("shared", "own")
    with pytest.warns(PluginWarning, match="is passed over"):
        late.register("shared", "json:dumps")
    assert late.get("shared") is json.dumps and late.plugin("shared") is None


def test_an_installed_judge_backend_is_a_backend_or_a_factory(site: Path) -> None:
    _install(
        site,
        "fj-judges",
        "[fj.test.judges]\n"
        "plain = fj_judges_mod:build\n"
        "described = fj_judges_mod:BACKEND\n"
        "missing = fj_judges_mod:nothing\n",
        {
            "fj_judges_mod": (
                "from faithjudge.judges import JudgeBackend\n"
                "from faithjudge.judges.lexicon import LexiconJudge\n"
                "def build(target, settings):\n"
                "    return LexiconJudge(target)\n"
                "BACKEND = JudgeBackend(form='described:NAME', factory=build)\n"
            )
        },
    )
    from faithjudge.judges import _installed_backend

    registry = Registry("judge backend", group="fj.test.judges", adapt=_installed_backend)
    assert registry.get("plain").form == "plain:TARGET"
    assert registry.get("described").form == "described:NAME"
    with pytest.raises(PluginError, match=r"fj-judges 1.2 .*missing = fj_judges_mod:nothing"):
        registry.get("missing")
    judge = registry.get("described").build("v1", Settings())
    assert judge.id == "lexicon:v1"


def test_an_installed_job_store_is_a_class_with_an_async_open_under_a_url_scheme(
    site: Path,
) -> None:
    _install(
        site,
        "fj-stores",
        "[fj.test.stores]\n"
        "fjstore = fj_stores_mod:Store\n"
        "fj+tls = fj_stores_mod:Store\n"
        "blocking = fj_stores_mod:Blocking\n"
        "text = fj_stores_mod:TEXT\n"
        "1st = fj_stores_mod:Store\n",
        {
            "fj_stores_mod": (
                "class Store:\n"
                "    @classmethod\n"
                "    async def open(cls, url, *, schema=None, migrate=True):\n"
                "        return cls()\n"
                "class Blocking:\n"
                "    @classmethod\n"
                "    def open(cls, url, *, schema=None, migrate=True):\n"
                "        return cls()\n"
                "TEXT = 'a store'\n"
            )
        },
    )
    from faithjudge.jobs.interface import JOB_STORES, _installed_store

    assert JOB_STORES.group == "faithjudge.job_stores"
    registry = Registry("job store", group="fj.test.stores", adapt=_installed_store)
    assert registry.names() == ("fjstore", "fj+tls", "blocking", "text", "1st")
    assert (
        registry.get("fjstore").__name__ == "Store" and registry.get("fj+tls").__name__ == "Store"
    )
    with pytest.raises(PluginError, match=r"fj-stores 1.2 .*names a type without an async open"):
        registry.get("blocking")
    with pytest.raises(PluginError, match=r"text = fj_stores_mod:TEXT.*names a str without"):
        registry.get("text")
    with pytest.raises(PluginError, match=r"'1st' is no URL scheme"):
        registry.get("1st")


def test_the_batch_route_and_its_live_twin_are_what_the_registry_says() -> None:
    assert is_batch_route("openai-batch:m") and is_batch_route(" openai-batch:m ")
    assert not any(is_batch_route(s) for s in ("openai:m", "lexicon:v1", "nope:m", "openai-batch"))
    assert live_spec("openai-batch:gpt-x") == "openai:gpt-x"
    assert live_spec("openai:gpt-x") == "openai:gpt-x" and live_spec("nope:m") == "nope:m"

    # a backend of another name is a batch route because it says so, not by its name
    register_judge(
        "night-queue",
        "faithjudge.provider_batch.judge:build",
        "night-queue:MODEL",
        batch_route=True,
        live_twin="openai",
    )
    register_judge("openai-batchless", "faithjudge.judges.builtin:lexicon")
    try:
        assert is_batch_route("night-queue:m") and live_spec("night-queue:m") == "openai:m"
        assert not is_batch_route("openai-batchless:v1")
    finally:
        JUDGES.unregister("night-queue")
        JUDGES.unregister("openai-batchless")


def test_a_batch_route_backend_must_build_the_batch_judge(tmp_path: Path) -> None:
    register_judge(
        "fake-batch", "faithjudge.judges.builtin:lexicon", "fake-batch:X", batch_route=True
    )
    try:
        with pytest.raises(ConfigError, match="is a Batch API route, but its factory built a Lex"):
            make_judge("fake-batch:v1", settings=Settings(data_dir=tmp_path))
    finally:
        JUDGES.unregister("fake-batch")
