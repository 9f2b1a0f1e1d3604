"""Datasets: campaign records -> one validated, split table with its card (``datasets/<name>/``).

    build  validate records (``harness.campaign.records``), exclude and count the unusable,
           split per case and sample, write Parquet/CSV/schema/digest; load_dataset
    card   the dataset card (README.md) with provenance
    cli    `mplab dataset build`

Leaves to others: measuring (``harness.campaign``) and training (``training``, which reads
datasets through ``load_dataset`` only).
"""
