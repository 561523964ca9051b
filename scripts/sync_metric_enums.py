"""Write the built-in metrics of the catalogue into the published JSON Schemas.

``schemas/score_request.schema.json`` (``metrics`` items) and ``schemas/item_result.schema.json``
(``metrics`` property names) list the metric names as an ``enum`` that tools outside FaithJudge
read. They are generated from ``faithjudge_client.metric_catalogue.BUILT_IN_METRICS``: run this
after adding a built-in metric; ``--check`` only reports a difference (exit 1), as the test suite
does. Only the ``enum`` arrays change; the rest of each file keeps its layout.

    python scripts/sync_metric_enums.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# (file, path of the enum inside it)
TARGETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("score_request.schema.json", ("properties", "metrics", "items", "enum")),
    ("item_result.schema.json", ("properties", "metrics", "propertyNames", "enum")),
)


def built_in_metrics() -> list[str]:
    sys.path.insert(0, str(ROOT / "clients"))
    from faithjudge_client.metric_catalogue import BUILT_IN_METRICS

    return list(BUILT_IN_METRICS)


def _enum(document: object, path: tuple[str, ...], where: Path) -> list[str]:
    node = document
    for key in path:
        if not isinstance(node, dict) or key not in node:
            raise SystemExit(f"{where}: no {'/'.join(path)} (the schema changed shape)")
        node = node[key]
    if not isinstance(node, list):
        raise SystemExit(f"{where}: {'/'.join(path)} is not an array")
    return node


def sync(schema_dir: Path, metrics: list[str], *, check: bool) -> list[str]:
    """The files whose enum differs from ``metrics`` (rewritten unless ``check``)."""
    stale = []
    for name, path in TARGETS:
        file = schema_dir / name
        text = file.read_text(encoding="utf-8")
        current = _enum(json.loads(text), path, file)
        if current == metrics:
            continue
        stale.append(name)
        if check:
            continue
        written = f'"enum": {json.dumps(current)}'
        if text.count(written) != 1:
            raise SystemExit(f"{file}: cannot find one {written!r} to replace; edit it by hand")
        updated = text.replace(written, f'"enum": {json.dumps(metrics)}')
        if _enum(json.loads(updated), path, file) != metrics:
            raise SystemExit(f"{file}: the replaced enum is not at {'/'.join(path)}")
        file.write_text(updated, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report, do not write")
    parser.add_argument("--schemas", type=Path, default=ROOT / "schemas")
    args = parser.parse_args(argv)
    metrics = built_in_metrics()
    stale = sync(args.schemas, metrics, check=args.check)
    for name in stale:
        verb = "lists other metrics than" if args.check else "now lists"
        print(f"{args.schemas / name} {verb} the catalogue's {metrics}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
