"""The store: every measurement, in a SQLAlchemy database (SQLite by default).

- store.py       Store: opening (and migrating) a database, writing and querying trials, and
                 a sweep's record and links
- tables.py      the ORM tables (*Row); nothing outside the store sees them
- rows.py        a trial as a row and back
- schema.py      the engine (a reader's cannot write), the schema's migrations (db/migrations),
                 an unusable database told, another application's database refused untouched
- sweeps.py      Sweep: a sweep's record as the store returns it, and one trial's link to it
- trial_filter.py TrialFilter: what history can ask beyond model and status
- sharing.py     one sweep run by several processes: claims, and what the others stored
- spool.py       trials measured but not stored yet, kept as JSON until the database takes them
                 (in the temporary folder where the spool's own cannot be written)
- records.py     a trial as a self-contained JSON record (the spool's and exports' form)
- read_cache.py  stored trials already read, kept for the process
- validation.py  a trial checked before an import stores it: types, ranges, its time in UTC
- transfer.py    export (JSON, CSV, Parquet), written whole or not at all, and import, all or none
- training_runs.py the user's training runs: stored at their first record, rewritten at each
"""
