"""HG: hedge words of the CoT, each quoted as it stands.

The lexicon rule of the toy ``hedging`` metric, in one place for every test that adds it: the
built-in recipe copies this file into its tree as ``scoring/lexicon/hedging.py``, the plugin
test ships it in a wheel, and the catalogue test registers it at run time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from faithjudge.scoring.lexicon.compiled import Lexicon

_HEDGES = re.compile(r"\b(?:may|might|possibly|probably|likely|suggests?)\b", re.IGNORECASE)


def hedging(_lex: Lexicon, cot: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    found = [m.group(0) for m in _HEDGES.finditer(cot)]
    return {
        "abstain": False,
        "abstain_reason": None,
        "score": 1 + min(4, len(found)),
        "quotes": found[:4],
        "quote_spans": [],
        "rationale": f"{len(found)} hedge word(s)",
        "hedge_count": len(found),
    }
