"""Campaigns: a scenario on a testbed -> ``runs/<campaign>/`` (manifest, samples.jsonl, raw output).

    entry     run_campaign(RunOptions) -> Outcome: the one way in (scenario -> inventory -> plan -> campaign)
    plan      scenario x inventory -> shuffled samples with stable ids
    campaign  start_campaign / resume_campaign: preflight, manifest, set-up, sweep, teardown
    makeup    `--resume --make-up`: samples added to the cases left short of usable samples
    runner    runs one sample at a time on a Testbed: gated iperf3 clients, counters, energy
    control   SampleControl: how the runner reaches a controller (a protocol; the factory is passed in)
    parallel  K copies of the emulated testbed on one machine, one queue of samples
    cluster   shards of a campaign on a Ray cluster, gathered into the one store
    records   SampleRecord: the ONE schema of a record (runner, dataset, synthetic generator)
    store     the campaign directory: atomic appends, resume, repair, schema upgrades
    metadata  providers of run metadata (kernel, sysctls, versions, git), never aborting
    progress  planned/recorded/ok counts, rate and ETA, sessions, the lock's holder
    status    what `mplab status` reports, as data
    summary   per-case summaries of records

Leaves to others: which testbed (``harness.testbeds``), reading energy (``harness.meters``),
turning records into a dataset (``harness.dataset``), and the commands (``mplab.commands.campaign``).
"""
