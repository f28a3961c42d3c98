"""The report: what a user reads in the terminal, and the pictures. What users named (a
workload, an optimizer, a GPU, a sweep's target) reaches rich as Text and matplotlib unparsed,
never as a str that either would read as markup (issue 30: [/] in a name was a traceback).

- terminal.py    a trial's breakdown, and the words every report shares (sizes, rates, settings,
                 lines that a narrow terminal breaks between phrases)
- sweep_report.py a sweep's lines, its recommendation, repeats, baseline and largest batches;
                 the resume line and the load's lines
- estimate_report.py the estimate against its target
- tables.py      stored trials as tables: history, one trial, trials side by side, the sweeps
- plots.py       PNG (and the dashboard's SVG) of a breakdown and of a sweep
- progress.py    the sweep's live progress bar
"""
