"""The report page: one self-contained ``index.html`` (figures embedded as PNG data URIs, SVGs beside it).

No script, no stylesheet or font from the network: the page opens from a file, offline, and
prints. Tables come with a link to their CSV in ``tables/``.
"""
from __future__ import annotations

import base64
from pathlib import Path

import jinja2
import pandas as pd

from analysis.style import Saved, Skipped

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1180px;
padding:1.2em 1.6em;color:#1d1d1d;line-height:1.45}
h1{font-size:1.5em;margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
h3{margin-bottom:.3em}
table{border-collapse:collapse;font-size:.82em;margin:.4em 0 1em}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}
th{background:#f4f4f4} td:first-child,th:first-child{text-align:left}
.prov td,.left td,.left th{text-align:left}
.pass{background:#d9f2dd;color:#14532d;font-weight:600} .fail{background:#fbd9d9;color:#7f1d1d;font-weight:600}
.na{background:#eee;color:#555}
figure{margin:1em 0 2em} figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.88em;color:#333;max-width:62em} .note{color:#555;font-size:.9em}
.banner{background:#fff6d6;border:1px solid #e8d48a;padding:.5em .8em;margin:.8em 0}
.scroll{overflow-x:auto} .scroll td{white-space:nowrap}
.wrapcells td{white-space:normal;vertical-align:top;min-width:6em} .lose{color:#7f1d1d}
</style></head>
<body>
<h1>{{ title }}</h1>
<p class="note">Built {{ built }} by mplab {{ mplab_version }}
{%- if mplab_commit %} (commit {{ mplab_commit }}){% endif %} in {{ seconds }} s. Inputs: {{ inputs }}.</p>
<div class="banner"><b>Energy:</b> {{ energy_banner }}</div>

<h2 id="provenance">Provenance</h2>
<div class="scroll"><table class="prov">
<tr><th>source</th><th>kind</th><th>testbed</th><th>inventory</th><th>power profile</th><th>energy</th><th>kernel</th>
<th>congestion controls</th><th>mplab</th><th>commit</th><th>records</th></tr>
{% for s in sources %}<tr><td>{{ s.name }}</td><td>{{ s.kind }}</td><td>{{ s.testbed_kinds|join(", ") }}</td>
<td>{{ s.inventories|join(", ") }}</td><td>{{ s.power_profiles|join(", ") or "—" }}</td>
<td>{{ s.energy_sources|join(", ") }}</td><td>{{ s.kernels|join(", ") }}</td><td>{{ s.cc_impls|join(", ") }}</td>
<td>{{ s.mplab_versions|join(", ") }}</td><td>{{ s.git|join(", ") or "—" }}</td><td>{{ s.records }}</td></tr>
{% endfor %}</table></div>
<p class="note">Statistics: {{ ci_text }}. Records left out (failed samples, failed receivers, flagged measurements)
are counted below and per case; they never enter a mean.</p>
{% for n in notes %}<p class="note">{{ n }}</p>{% endfor %}

<h2 id="excluded">Left out</h2>
{% if excluded %}{{ excluded|safe }}{% else %}<p>Nothing: every record is usable.</p>{% endif %}

<h2 id="checks">Reproduction checks (the reference paper's Tables 2-3; docs/reference/papers.md §1)</h2>
<p class="note">Each check runs on the paper's own Tables 2-3 (column "paper") and on ours, on case means.
{{ paper_citation }}</p>
{{ checks|safe }}

<h2 id="tables">Tables 2-3 analogs beside the paper</h2>
<p class="note">Per node count and paper column: the paper's value and ours (mean, 95% interval, samples).
Setup I campaigns fill the MPTCP, LTE and WiFi columns (by congestion control and mode); the SDN columns need a
Setup II campaign with the <code>ref-is-tuned</code> policy. The paper moved {{ paper_file_size }} per receiver;
energies per MB compare across file sizes.</p>
{% for t in analog_tables %}<h3>{{ t.title }}</h3><p class="note"><a href="{{ t.csv }}">{{ t.csv }}</a></p>
<div class="scroll">{{ t.html|safe }}</div>{% endfor %}

{% for section in sections %}<h2 id="{{ section.id }}">{{ section.title }}</h2>
{% if section.intro %}<p class="note">{{ section.intro }}</p>{% endif %}
{% for t in section.tables %}<h3>{{ t.title }}</h3><p class="note"><a href="{{ t.csv }}">{{ t.csv }}</a></p>
<div class="scroll wrapcells">{{ t.html|safe }}</div>{% endfor %}
{% for f in section.figures %}<figure id="fig-{{ f.name }}"><h3>{{ f.title }}</h3>
<img src="data:image/png;base64,{{ f.data }}" alt="{{ f.title }}" width="{{ f.width }}">
<figcaption>{{ f.caption }} <a href="{{ f.svg }}">SVG</a></figcaption></figure>
{% endfor %}{% for s in section.skipped %}<p class="note"><b>{{ s.title }}</b>: not drawn: {{ s.reason }}.</p>
{% endfor %}{% if not section.figures and not section.skipped and not section.tables %}<p class="note">Nothing to show.</p>{% endif %}
{% endfor %}

<h2 id="statistics">Per-case statistics</h2>
{% for t in stat_tables %}<h3>{{ t.title }}</h3><p class="note"><a href="{{ t.csv }}">{{ t.csv }}</a></p>
<div class="scroll">{{ t.html|safe }}</div>{% endfor %}
</body></html>
"""


def table_html(df: pd.DataFrame, status_cols: tuple[str, ...] = (), left: bool = False) -> str:
    """A frame as an HTML table; pass/fail/n/a cells of ``status_cols`` get a colour class; ``left``: text table."""
    html = df.to_html(index=False, na_rep="–", float_format=lambda x: f"{x:.4g}", border=0, escape=True,
                      classes="left" if left else None)
    for s, cls in (("pass", "pass"), ("fail", "fail"), ("n/a", "na")):
        if status_cols:
            html = html.replace(f"<td>{s}</td>", f'<td class="{cls}">{s}</td>')
    return html


def figure_entry(fig: Saved, root: Path) -> dict:
    from PIL import Image

    with Image.open(fig.png) as im:
        width = im.width
    return {"name": fig.name, "title": fig.title, "caption": fig.caption,
            "data": base64.b64encode(fig.png.read_bytes()).decode(), "svg": fig.svg.relative_to(root).as_posix(),
            "width": width}


def render(context: dict) -> str:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(TEMPLATE).render(**context)


def section(sid: str, title: str, items: list[Saved | Skipped], root: Path, tables: list[dict] | None = None,
            intro: str = "") -> dict:
    """A report section: its figures (embedded), what was not drawn and why, and tables shown before them."""
    return {"id": sid, "title": title, "intro": intro, "tables": tables or [],
            "figures": [figure_entry(i, root) for i in items if isinstance(i, Saved)],
            "skipped": [i for i in items if isinstance(i, Skipped)]}
