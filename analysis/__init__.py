"""Analysis: campaigns and datasets -> statistics, figures, tables beside the reference paper, a report.

Data flows one way: this package reads files (campaign directories, datasets, exported models,
the paper's numbers in ``harness/data/paper/``) and writes ``reports/<name>/``. It imports ``harness``
for the record and dataset readers and ``training.runtime`` (the ONNX model reader controllers
use too); it never imports ``controller`` or ``mplab``.

Modules: ``load`` (sources -> one tidy frame + provenance), ``stats`` (per-case statistics with
confidence intervals), ``paper`` (Tables 2-3 analogs and the reproduction checks), ``style``
(colours, labels, saving), ``figures/`` (one module per figure family), ``html`` (the page),
``report`` (the whole build). `mplab report` is ``mplab.commands.report``.
"""
