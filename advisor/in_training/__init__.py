"""What runs inside the user's own training, beside advisor's answer.

- oom_fallback.py OOMFallback: a step that runs out of memory, run again whole at a smaller
                  micro batch with more accumulation; every rank agrees first
"""
