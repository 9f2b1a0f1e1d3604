"""Figure families, one module each: ``setup1`` (Figs. 3-5 analogs), ``setup2`` (Figs. 10-15 analogs and a
throughput-energy scatter), ``sample`` (one sample up close), ``model`` (dataset and model).

Every function takes what it plots (statistics frames, paths) plus a ``Palette`` and an output
directory, and returns ``Saved`` figures or ``Skipped`` entries saying why a figure was not drawn.
"""
