"""Croissant metadata (``croissant.json``): the dataset described for dataset search and loaders.

Croissant (MLCommons, JSON-LD over schema.org) describes the files (the CSV with its sha256, the
per-split Parquet files as a file set), and one record set ``rows`` whose fields are the table's
columns (type, unit, description), read from the Parquet files. The dataset's version and URL are
the ones dataset.json records (``harness.dataset.build``), the citation the reference paper's
(``harness.citations``). Written from ``COLUMN_DOCS`` (mlcroissant is not a runtime dependency);
the tests validate it with ``mlcroissant`` and read records through it.
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
    "replace": "cr:replace", "samplingRate": "cr:samplingRate", "equivalentProperty": "cr:equivalentProperty",
    "sc": "https://schema.org/", "separator": "cr:separator", "source": "cr:source",
    "subField": "cr:subField", "transform": "cr:transform",
}
CSV = "data.csv"
PARQUET = "application/x-parquet"


def _data_type(column: str) -> str:
    from harness.dataset.columns import FLOAT_COLUMNS, INT_COLUMNS

    return "sc:Integer" if column in INT_COLUMNS else "sc:Float" if column in FLOAT_COLUMNS else "sc:Text"


def croissant(folder: Path, meta: dict) -> dict:
    """The Croissant document of the dataset in ``folder`` (data files already written)."""
    from harness import citations
    from harness.dataset.columns import COLUMN_DOCS

    ref = citations.reference()
    kinds = sorted({s.get("testbed_kind") or "?" for s in meta["sources"]})
    fields = []
    for c in COLUMN_DOCS:
        unit, desc = COLUMN_DOCS[c]
        fields.append({"@type": "cr:Field", "@id": f"rows/{c}", "name": c,
                       "description": desc + (f" ({unit})" if unit else ""), "dataType": _data_type(c),
                       "source": {"fileSet": {"@id": "parquet-splits"}, "extract": {"column": c}}})
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CONFORMS_TO,
        "name": meta["name"],
        "description": (f"Energy of dual-homed (WiFi + LTE) MPTCP receivers, one row per receiver per sample of "
                        f"{len(meta['sources'])} mplab campaign(s) ({', '.join(kinds)} testbed); "
                        f"{meta['splits']['train']} train and {meta['splits']['test']} test rows."),
        "license": meta.get("license") or "unknown",
        "url": meta["url"],
        "version": meta["version"],
        "datePublished": meta["created_at"],
        "identifier": meta["digest"],
        **({"citeAs": ref.bibtex()} if ref else {}),
        "keywords": ["MPTCP", "energy", "WiFi", "LTE", "mplab"],
        "distribution": [
            {"@type": "cr:FileObject", "@id": CSV, "name": CSV, "contentUrl": CSV, "encodingFormat": "text/csv",
             "sha256": file_sha256(folder / CSV), "description": "the whole table, both splits (column split)"},
            *({"@type": "cr:FileObject", "@id": rel, "name": rel, "contentUrl": rel, "encodingFormat": PARQUET,
               "sha256": file_sha256(folder / rel), "description": f"the {s} split"}
              for s, rel in meta["split_files"].items()),
            {"@type": "cr:FileSet", "@id": "parquet-splits", "name": "parquet-splits",
             "description": "one Parquet file per split", "encodingFormat": PARQUET, "includes": "data/*.parquet"},
        ],
        "recordSet": [{"@type": "cr:RecordSet", "@id": "rows", "name": "rows",
                       "description": "one receiver in one sample", "field": fields}],
    }
