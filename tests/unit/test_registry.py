"""The one registry mechanism, and the settings a registered backend declares for itself."""

from __future__ import annotations

import subprocess
import sys

import pytest
from faithjudge.errors import ConfigError
from faithjudge.judges import JUDGES, make_judge, register_judge
from faithjudge.scoring.lexicon import RULES, register_rule, unregister_rule
from faithjudge.settings import Settings
from faithjudge_client.metric_catalogue import CATALOGUE, metric_names
from faithjudge_client.registry import NameClash, Registry, RegistryError, UnknownName
from pydantic import BaseModel, SecretStr


def test_an_entry_is_an_object_or_a_reference_imported_on_first_use() -> None:
    registry: Registry[object] = Registry("thing")
    registry.register("direct", len)
    registry.register("lazy", "json:dumps")
    assert registry.names() == ("direct", "lazy") and "lazy" in registry and len(registry) == 2
    assert registry.ref("lazy") == "json:dumps" and registry.ref("direct") is None
    import json

    assert registry.get("lazy") is json.dumps and registry.get("direct") is len
    assert registry.items() == (("direct", len), ("lazy", json.dumps))


def test_listing_names_imports_nothing() -> None:
    code = (
        "import sys\n"
        "from faithjudge_client.registry import Registry\n"
        "r = Registry('thing'); r.register('x', 'xml.dom.minidom:parseString')\n"
        "assert r.names() == ('x',) and 'xml.dom.minidom' not in sys.modules\n"
        "r.get('x'); assert 'xml.dom.minidom' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_clash_is_refused_unless_replaced_and_a_repeat_is_harmless() -> None:
    registry: Registry[object] = Registry("widget")
    registry.register("a", "json:dumps")
    registry.register("a", "json:dumps")  # the same entry again (a plugin imported twice)
    import json

    registry.get("a")
    registry.register("a", json.dumps)  # the object the reference already stood for
    with pytest.raises(NameClash, match=r"widget 'a' is already registered \(as 'json:dumps'\)"):
        registry.register("a", "json:loads")
    assert registry.get("a") is json.dumps
    registry.register("a", "json:loads", replace=True)
    assert registry.get("a") is json.loads


def test_an_unknown_name_lists_the_known_ones() -> None:
    registry: Registry[object] = Registry("gadget")
    registry.register("first", 1)
    registry.register("second", 2)
    with pytest.raises(UnknownName, match="unknown gadget 'third'; known: first, second"):
        registry.get("third")
    with pytest.raises(LookupError):
        registry.get("third")
    registry.unregister("first")
    registry.unregister("never there")
    assert registry.names() == ("second",)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("json", "not a 'package.module:object' reference"),
        ("json:", "not a 'package.module:object' reference"),
        ("no_such_module_here:x", "cannot import 'no_such_module_here'"),
        ("json:no_such_name", "'json' has no 'no_such_name'"),
    ],
)
def test_a_bad_reference_is_named(entry: str, message: str) -> None:
    registry: Registry[object] = Registry("part")
    try:
        registry.register("p", entry)
    except RegistryError as exc:  # malformed: refused at once
        assert message in str(exc)
        return
    with pytest.raises(RegistryError, match=f"part 'p': .*{message}"):
        registry.get("p")


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(RegistryError, match="non-empty name"):
        Registry("part").register(" ", 1)


def test_the_catalogue_the_rules_and_the_backends_are_registries() -> None:
    assert CATALOGUE.names() == metric_names()
    assert set(metric_names()) <= set(RULES.names())
    assert {"lexicon", "openai", "openai-batch", "litellm", "replay"} <= set(JUDGES.names())


def test_a_lexicon_rule_clash_is_refused() -> None:
    with pytest.raises(ValueError, match="lexicon rule 'confidence_tone' is already registered"):
        register_rule("confidence_tone", lambda lex, cot, inputs: {})
    register_rule("a_metric_of_a_plugin", "faithjudge.scoring.lexicon:confidence_tone")
    try:
        assert RULES.get("a_metric_of_a_plugin") is RULES.get("confidence_tone")
    finally:
        unregister_rule("a_metric_of_a_plugin")


# ------------------------------------------------------------ the settings a backend declares


class _Options(BaseModel):
    demo_url: str = "http://default"
    demo_key: SecretStr | None = None
    demo_limit: int = 3


def test_declared_settings_come_from_the_environment_or_the_constructor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAITHJUDGE_DEMO_URL", "http://from-env")
    monkeypatch.setenv("FAITHJUDGE_DEMO_KEY", "sk-env")
    options = Settings().options(_Options)
    assert options.demo_url == "http://from-env" and options.demo_limit == 3
    assert options.demo_key is not None and options.demo_key.get_secret_value() == "sk-env"
    given = Settings(demo_url="http://given", demo_limit=7).options(_Options)
    assert given.demo_url == "http://given" and given.demo_limit == 7  # the constructor wins
    # read nowhere else, and masked until a part reads them
    assert "sk-env" not in repr(Settings()) and "from-env" not in repr(Settings())
    assert Settings.model_construct().options(_Options).demo_url == "http://default"


def test_a_bad_declared_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAITHJUDGE_DEMO_LIMIT", "many")
    with pytest.raises(ConfigError, match=r"demo_limit \(FAITHJUDGE_DEMO_LIMIT\)"):
        Settings().options(_Options)


def test_a_backend_checks_its_settings_before_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    register_judge(
        "demo", lambda target, settings: built.append(target), "demo:X", options=_Options
    )
    try:
        assert JUDGES.get("demo").variables() == (
            "FAITHJUDGE_DEMO_URL",
            "FAITHJUDGE_DEMO_KEY",
            "FAITHJUDGE_DEMO_LIMIT",
        )
        monkeypatch.setenv("FAITHJUDGE_DEMO_LIMIT", "many")
        with pytest.raises(ConfigError, match="FAITHJUDGE_DEMO_LIMIT"):
            make_judge("demo:x", settings=Settings())
        assert built == []
    finally:
        JUDGES.unregister("demo")


def test_the_openai_variables_keep_working(monkeypatch: pytest.MonkeyPatch) -> None:
    """FAITHJUDGE_OPENAI_* first, then the SDK's own OPENAI_*; the transport variable too."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/sdk/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-sdk")
    plain = make_judge("openai:m", settings=Settings())
    assert plain.settings()["base_url"] == "http://127.0.0.1:9/sdk/v1/"
    assert plain.client.api_key == "sk-sdk"  # type: ignore[attr-defined]

    monkeypatch.setenv("FAITHJUDGE_OPENAI_BASE_URL", "http://127.0.0.1:9/ours/v1")
    monkeypatch.setenv("FAITHJUDGE_OPENAI_API_KEY", "sk-ours")
    monkeypatch.setenv("FAITHJUDGE_HTTP_TRANSPORT", "httpx")
    ours = make_judge("openai:m", settings=Settings())
    assert ours.settings()["base_url"] == "http://127.0.0.1:9/ours/v1/"
    client = ours.client  # type: ignore[attr-defined]
    assert client.api_key == "sk-ours"
    assert "aiohttp" not in type(client._client).__name__.lower()

    monkeypatch.setenv("FAITHJUDGE_HTTP_TRANSPORT", "carrier-pigeon")
    with pytest.raises(ConfigError, match=r"http_transport \(FAITHJUDGE_HTTP_TRANSPORT\)"):
        make_judge("openai:m", settings=Settings())
