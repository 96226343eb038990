"""The results pages' sections, read from a profile's metrics files and never typed by hand: Table 3 and the
attention study (sections), the claims table over training runs (claim decides each row, claims_table prints it,
evidence reads the per-run files), what the runs can speak to beside each verdict (scope), the dose curve (dose), the
synthetic questions' quality (questions), the related system (related), the mechanism (mechanism_section), fine-tuning
length (fine_tuning), the settings and wall times (stage_records), the stale stages (staleness); and two tools:
``python -m ecqg.report.recompute`` (every claims row from the committed files) and ``python -m ecqg.report.agreement``
(two runs of one design). The stage that assembles them into a page is :mod:`ecqg.stages.report`.
"""
