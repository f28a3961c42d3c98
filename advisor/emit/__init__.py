"""The answer in the user's trainer's words: a setting (a TrialSpec) as transformers'
TrainingArguments, Lightning's Trainer, an accelerate config file, or plain PyTorch lines, each
named as the installed library names it; what a trainer cannot express is given as the lines
(or the environment variable) that do it, never dropped.

- trainers.py    Trainer (the emit= choices) and trainer_config(spec, trainer)
- lines.py       TrainerConfig, and the PyTorch lines every trainer shares for what its own
                 arguments cannot say (TF32, NHWC, checkpointing, compile, the optimizer, the
                 allocator's environment variable)
- transformers_args.py TrainingArguments' keyword arguments (emit=hf)
- lightning_args.py Lightning Trainer's keyword arguments (emit=lightning)
- accelerate_config.py the file accelerate launch --config_file reads (emit=accelerate)
- torch_loop.py  plain PyTorch: the setup and the train step (emit=torch)
"""
