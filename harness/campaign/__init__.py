"""Campaigns: a scenario on a testbed -> ``runs/<campaign>/`` (manifest, samples.jsonl, raw output).

    plan      scenario x inventory -> shuffled samples with stable ids
    runner    runs one sample at a time on a Testbed: gated iperf3 clients, counters, energy
    records   SampleRecord: the ONE schema of a record (runner, dataset, synthetic generator)
    store     the campaign directory: atomic appends, resume, repair, schema upgrades
    metadata  providers of run metadata (kernel, sysctls, versions, git), never aborting
    summary   per-case summaries of records
    campaign  start_campaign / resume_campaign: preflight, manifest, set-up, sweep, teardown
    cli       `mplab run`, `status`, `clean`

Leaves to others: which testbed (``harness.testbeds``), reading energy (``harness.meters``),
and turning records into a dataset (``harness.dataset``).
"""
