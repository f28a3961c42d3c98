"""What runs inside the user's own training, beside advisor's answer.

- oom_fallback.py OOMFallback: a step that runs out of memory, run again whole at a smaller
                  micro batch with more accumulation; every rank agrees first
- training_run.py TrainingRun: the user's run recorded as a trial of kind training (its peaks
                  and rate every N steps) beside the measured trial it followed; a plain
                  context for a custom loop, and what the trainers' callbacks run
                  (Recording: the options a callback keeps until its training begins)
- transformers_callback.py AdvisorCallback: TrainingRun as a transformers TrainerCallback
- lightning_callback.py AdvisorCallback: TrainingRun as a Lightning Callback
"""
