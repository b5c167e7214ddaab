"""The results tables and figures of an experiment (`cptlab aggregate`, `cptlab findings`,
`cptlab figures`, `cptlab headline`).

cl_metrics.py  continual-learning metrics over accuracies (pure functions)
trajectory.py  every evaluated checkpoint of a chain in training order; trajectory.csv
ledger.py      the per-item ledger: item_ledger.csv, transitions.csv (chance-adjusted flips)
aggregate.py   scores.csv, trajectory.csv, cl_metrics.csv, cl_summary.csv and the ledger
findings.py    findings.csv / .html: the study's six findings and the testbed's two checks
figures.py     continual-learning curves, accuracy matrices, OOD bars, training curves
headline.py    the terminal's table at the end of a run: gain, forgetting, verdicts, report
cli.py         the subcommands
"""
