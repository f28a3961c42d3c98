"""The trial: one setting measured for real, in a process of its own.

- runner.py      run_trial: a process per trial, forked by the fork server; its exit as a status
- fork_server.py ForkServer: a process that has imported torch once and forks each trial
- worker.py      the trial's own process: its spec in, its TrialResult out
- training.py    the workload's model, optimizer, scaler and batch built for a spec; the step
- one_rank.py    one rank of a job on several GPUs (DDP, FSDP2) on torch's fake process group;
                 FSDP2's frees by resize told to a count of storages (the CPU's, the estimate's)
- collectives.py Collectives: the bytes a rank's all-reduces, gathers and scatters carry in a step
- measure.py     measure: warm-up, timed steps and memory by category, for one spec
- device_memory.py the allocator's counters (CUDA) or every storage counted (CPU); step phases
- timing.py      MeasureConfig, timed steps until the median is known; FLOPs of a step
- machine_load.py MachineLoad: others' share of the CPUs while the steps were timed
- out_of_memory.py OutOfMemory as data (phase, allocation), and the cap to a smaller GPU
- oom_killer.py  the kernel's OOM killer, told apart from a crash
- snapshot.py    torch's memory snapshot of a trial, for pytorch.org/memory_viz
"""
