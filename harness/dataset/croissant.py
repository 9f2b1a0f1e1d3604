"""Croissant metadata (``croissant.json``): the dataset described for dataset search and loaders.

Croissant (MLCommons, JSON-LD over schema.org) describes the files (with their sha256), and
one record set ``rows`` whose fields are the table's columns (type, unit, description), read
from ``data.parquet``. Written by hand from ``COLUMN_DOCS`` (no runtime dependency); the tests
validate it with ``mlcroissant`` and read records through it.
"""
from __future__ import annotations

from pathlib import Path

from harness.artifacts import file_sha256

CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
#: The Croissant 1.0 JSON-LD context, as the specification publishes it.
CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "citeAs": "cr:citeAs", "column": "cr:column",
    "conformsTo": "dct:conformsTo", "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/", "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract", "field": "cr:field", "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes", "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath", "key": "cr:key", "md5": "cr:md5", "parentField": "cr:parentField", "path": "cr:path",
    "recordSet": "cr:recordSet", "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated",
    "replace": "cr:replace", "samplingRate": "cr:samplingRate", "equivalentProperty": "cr:equivalentProperty", "sc": "https://schema.org/", "separator": "cr:separator", "source": "cr:source",
    "subField": "cr:subField", "transform": "cr:transform",
}
FILES = {"data.parquet": "application/x-parquet", "data.csv": "text/csv"}


def _data_type(column: str) -> str:
    from harness.dataset.columns import FLOAT_COLUMNS, INT_COLUMNS

    return "sc:Integer" if column in INT_COLUMNS else "sc:Float" if column in FLOAT_COLUMNS else "sc:Text"


def croissant(folder: Path, meta: dict) -> dict:
    """The Croissant document of the dataset in ``folder`` (data files already written)."""
    from harness.dataset.columns import COLUMN_DOCS
    from harness.dataset.card import reference_citation

    cite = reference_citation()
    kinds = sorted({s.get("testbed_kind") or "?" for s in meta["sources"]})
    fields = []
    for c in COLUMN_DOCS:
        unit, desc = COLUMN_DOCS[c]
        fields.append({"@type": "cr:Field", "@id": f"rows/{c}", "name": c,
                       "description": desc + (f" ({unit})" if unit else ""), "dataType": _data_type(c),
                       "source": {"fileObject": {"@id": "data.parquet"}, "extract": {"column": c}}})
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CONFORMS_TO,
        "name": meta["name"],
        "description": (f"Energy of dual-homed (WiFi + LTE) MPTCP receivers, one row per receiver per sample of "
                        f"{len(meta['sources'])} mplab campaign(s) ({', '.join(kinds)} testbed); "
                        f"{meta['splits']['train']} train and {meta['splits']['test']} test rows."),
        "license": meta.get("license") or "unknown",
        "url": f"file:{meta['name']}",
        "version": "1.0.0",
        "datePublished": meta["created_at"],
        "identifier": meta["digest"],
        **({"citeAs": cite["text"]} if cite else {}),
        "keywords": ["MPTCP", "energy", "WiFi", "LTE", "mplab"],
        "distribution": [{"@type": "cr:FileObject", "@id": name, "name": name, "contentUrl": name,
                          "encodingFormat": fmt, "sha256": file_sha256(folder / name)}
                         for name, fmt in FILES.items()],
        "recordSet": [{"@type": "cr:RecordSet", "@id": "rows", "name": "rows",
                       "description": "one receiver in one sample", "field": fields}],
    }
