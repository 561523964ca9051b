"""Hostile image inputs in a sidecar run: each is an issue line, the run goes on, memory bounded.

- An image name longer than the file system allows (ENAMETOOLONG) used to end the whole run.
- A 8000 x 7999 PNG of a few hundred KB passed the pixel cap and cost 1.4 GB once loaded: the
  decoded size is now bounded before decoding, and images are downscaled on load.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from faithjudge.sidecar import images
from faithjudge.sidecar.cli import app as sidecar_app
from PIL import Image
from typer.testing import CliRunner

from tests.fakes.vlm_server import FakeVLM, run_fake_vlm
from tests.integration.sidecar_fixtures import MALROTATED, items_and_images, read_jsonl

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVLM]:
    with run_fake_vlm() as server:
        yield server


@pytest.fixture(scope="module")
def huge_png(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8000 x 7999 RGB, all one colour: a few hundred KB on disk, 256 MB once decoded."""
    path = tmp_path_factory.mktemp("huge") / "huge.png"
    Image.new("RGB", (8000, 7999), (90, 90, 90)).save(path, optimize=True)
    assert path.stat().st_size < 1_000_000
    return path


def test_a_long_name_and_a_huge_image_are_issue_lines_and_the_run_goes_on(
    fake: FakeVLM, tmp_path: Path, huge_png: Path
) -> None:
    items, image_dir = items_and_images(tmp_path)
    (image_dir / "huge.png").write_bytes(huge_png.read_bytes())
    extra = [
        {"item_id": "long-name", "image": "x" * 300 + ".png", "question": MALROTATED,
         "ground_truth": "no"},
        {"item_id": "huge", "image": "huge.png", "question": MALROTATED, "ground_truth": "no"},
    ]  # fmt: skip
    with items.open("ab") as sink:
        for row in extra:
            sink.write(orjson.dumps(row) + b"\n")
    output = tmp_path / "requests.jsonl"
    result = CliRunner().invoke(
        sidecar_app,
        ["generate", str(items), "--images", str(image_dir), "--backend", "openai",
         "--base-url", fake.base_url, "--model", "fake-vlm", "-o", str(output), "-m", "SHAM",
         "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = read_jsonl(output)
    generated = {line["item_id"] for line in lines}
    # the three good items and the huge one (downscaled on load) are generated
    assert generated == {"eff-r", "cmp", "rot", "huge"}
    issues = read_jsonl(output.with_name(output.name + ".issues.jsonl"))
    by_item = {issue.get("item_id"): issue for issue in issues}
    assert "long-name" in by_item and "cannot be used" in by_item["long-name"]["reason"]
    assert "304 characters" in by_item["long-name"]["reason"]


def test_the_decoded_size_is_bounded_before_decoding(huge_png: Path) -> None:
    with pytest.raises(images.ImageError) as info:
        images.load_image(huge_png, max_decoded_bytes=64 * 2**20)
    assert info.value.reason == "too_much_memory" and "MiB to decode" in str(info.value)
    small = images.load_image(huge_png, max_side=1024)
    assert max(small.size) == 1024 and small.size == (1024, round(7999 * 1024 / 8000))


_LOAD_AND_PREPROCESS = """
import resource, sys
from pathlib import Path
from faithjudge.sidecar import images
img = images.load_image(Path(sys.argv[1]), max_side=2048)
out = images.preprocess(img)
print(out.size, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_peak_memory_of_loading_the_huge_image_is_bounded(huge_png: Path) -> None:
    baseline = subprocess.run(
        [sys.executable, "-c", "import resource, faithjudge.sidecar.images; "
         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    child = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_PREPROCESS, str(huge_png)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    size, peak_kib = child.stdout.rsplit(" ", 1)
    assert size.strip() == "(2048, 2048)"
    added_mib = (int(peak_kib) - int(baseline.stdout)) / 1024
    # the decode itself is 256 MB (RGB is stored 4 bytes a pixel); before the bound it was 1.4 GB
    assert added_mib < 400, added_mib
    assert resource.RUSAGE_CHILDREN  # measured in the child, never in this test process
