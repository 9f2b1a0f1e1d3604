"""Datasets: campaign records -> one validated, split table with its card (``datasets/<name>/``).

    build      validate records (``harness.campaign.records``), exclude and count the unusable,
               split per case and sample, write Parquet/CSV/schema/digest; load_dataset
    card       the dataset card (README.md) with provenance
    columns    each column's type, unit and meaning
    croissant  croissant.json: the dataset described for dataset search and loaders
    registry   published datasets: versioned, digest-checked copies beside MLflow's artifacts

Leaves to others: measuring (``harness.campaign``), training (``training``, which reads
datasets through ``load_dataset`` only) and the commands (``mplab.commands.dataset``).
"""
