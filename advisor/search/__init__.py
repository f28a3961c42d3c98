"""The search: a sweep over training settings, Optuna's ask and tell, cheap by construction.

- sweeper.py     Sweeper: the study driven, specs settled with or without running them
- space.py       Space: the axes searched and the spec each point names
- design.py      Design: the trials measured before the sampler's own
- climb.py       Climb: the batch each setting is measured at, and the nuisance axes' rescues
- feasibility.py Feasibility: whether a spec can fit, judged without running it
- throughput_model.py a main-effects model naming the setting predicted fastest
- study.py       where the Optuna study lives, its key (resume), what it is told; Resumed
- steps.py       Step, Settled, SweepProgress: what the sweep did, step by step
- answer.py      Answer: the recommended setting measured again until it is known; LoadCheck:
                 rates taken under another load measured again, or said apart
- backend.py     where measurements come from (worker processes on the local devices)
"""
