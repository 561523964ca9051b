"""Answer-level grounding audits of the companion papers: Lotfinia, Zafar and MedVIGIL.

Answer records (``records.AnswerRecord``, one JSONL line per model × item × condition) are
loaded and validated at the edge (``load``), checked against each other (``consistency``), and
audited by pure, vectorised functions (``lotfinia``, ``zafar``, ``medvigil``); ``report`` runs
the selected audits and ``render`` writes Markdown and HTML.
"""

from faithjudge.audits.consistency import AuditTable, prepare
from faithjudge.audits.load import AuditInputError, load_records, parse_lines
from faithjudge.audits.lotfinia import LotfiniaConfig, lotfinia_audit
from faithjudge.audits.medvigil import MedvigilConfig, medvigil_audit
from faithjudge.audits.records import AnswerRecord, ItemMeta
from faithjudge.audits.report import AuditOptions, run_audit
from faithjudge.audits.zafar import ZafarConfig, zafar_audit

__all__ = [
    "AnswerRecord",
    "AuditInputError",
    "AuditOptions",
    "AuditTable",
    "ItemMeta",
    "LotfiniaConfig",
    "MedvigilConfig",
    "ZafarConfig",
    "load_records",
    "lotfinia_audit",
    "medvigil_audit",
    "parse_lines",
    "prepare",
    "run_audit",
    "zafar_audit",
]
