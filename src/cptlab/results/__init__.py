"""The results tables and figures of an experiment (`cptlab aggregate`, `cptlab findings`,
`cptlab figures`).

cl_metrics.py  continual-learning metrics over accuracies (pure functions)
aggregate.py   scores.csv, cl_metrics.csv and cl_summary.csv from the evaluation files
findings.py    findings.csv / .html: the study's six findings and the testbed's two checks
figures.py     continual-learning curves, accuracy matrices, OOD bars, training curves
cli.py         the subcommands
"""
