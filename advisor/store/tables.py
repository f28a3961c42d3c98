"""The results database's tables (SQLAlchemy 2 ORM). The rest of the code sees store.py's
dataclasses, never these rows. Changing a table needs a migration under db/migrations."""

from __future__ import annotations

import datetime

from sqlalchemy import BigInteger, DateTime, Float, ForeignKey, Index, String, Text, false
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    pass


class EnvironmentRow(Base):
    """Where trials ran: one row per distinct machine and software stack."""

    __tablename__ = "environments"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)  # hash of the fields below
    device_name: Mapped[str] = mapped_column(String(200))
    device_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    driver: Mapped[str | None] = mapped_column(String(50))
    cuda: Mapped[str | None] = mapped_column(String(50))
    torch: Mapped[str] = mapped_column(String(50))
    advisor: Mapped[str] = mapped_column(String(50))
    python: Mapped[str] = mapped_column(String(50))
    host: Mapped[str] = mapped_column(String(200))


class TrialRow(Base):
    """One measured trial: its spec (whole, as JSON, and its knobs as columns to query), its
    status, and every figure in bytes and seconds."""

    __tablename__ = "trials"
    __table_args__ = (
        Index("ix_trials_model_created", "model", "created_at"),
        # newest first, for history's pages; with the source, so that workload= (matched by
        # its end, which no index orders) is checked in the index, not in each row
        Index("ix_trials_created", "created_at", "id", "source"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
    spec_hash: Mapped[str] = mapped_column(String(32), index=True)
    spec_json: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(200))
    family: Mapped[str] = mapped_column(String(100))
    device: Mapped[str] = mapped_column(String(20))
    batch_size: Mapped[int]
    grad_accum: Mapped[int]
    precision: Mapped[str] = mapped_column(String(20))
    checkpointing: Mapped[str] = mapped_column(String(20))
    optimizer: Mapped[str] = mapped_column(String(100))
    channels_last: Mapped[bool]
    compile: Mapped[bool]
    expandable_segments: Mapped[bool]
    memory_cap_bytes: Mapped[int | None] = mapped_column(BigInteger)
    # the workload's code and library versions (WorkloadSpec.fingerprint); None before 0003
    fingerprint: Mapped[str | None] = mapped_column(String(16))
    # where its function is (WorkloadSpec.source; "" before 0003), for history's workload=:
    # matched by its end, which no index helps, so it is kept short, out of spec_json
    source: Mapped[str] = mapped_column(Text, default="")

    status: Mapped[str] = mapped_column(String(20), index=True)
    wall_s: Mapped[float] = mapped_column(Float)
    memory_snapshot: Mapped[str | None] = mapped_column(Text)  # its file; None before 0007
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environments.id"))
    environment: Mapped[EnvironmentRow | None] = relationship(lazy="joined")

    failure_phase: Mapped[str | None] = mapped_column(String(20))
    failure_requested_bytes: Mapped[int | None] = mapped_column(BigInteger)
    failure_message: Mapped[str | None] = mapped_column(Text)

    context_bytes: Mapped[int | None] = mapped_column(BigInteger)
    params_bytes: Mapped[int | None] = mapped_column(BigInteger)
    buffers_bytes: Mapped[int | None] = mapped_column(BigInteger)  # None before 0003: in params
    activations_bytes: Mapped[int | None] = mapped_column(BigInteger)
    grads_bytes: Mapped[int | None] = mapped_column(BigInteger)
    optimizer_state_bytes: Mapped[int | None] = mapped_column(BigInteger)
    inputs_bytes: Mapped[int | None] = mapped_column(BigInteger)
    peak_allocated_bytes: Mapped[int | None] = mapped_column(BigInteger)
    peak_reserved_bytes: Mapped[int | None] = mapped_column(BigInteger)
    steady_peak_allocated_bytes: Mapped[int | None] = mapped_column(BigInteger)
    steady_peak_reserved_bytes: Mapped[int | None] = mapped_column(BigInteger)
    peak_phase: Mapped[str | None] = mapped_column(String(20))
    device_peak_bytes: Mapped[int | None] = mapped_column(BigInteger)
    nvml_process_bytes: Mapped[int | None] = mapped_column(BigInteger)
    num_alloc_retries: Mapped[int | None]

    samples_per_s: Mapped[float | None] = mapped_column(Float)
    tokens_per_s: Mapped[float | None] = mapped_column(Float)
    step_s_median: Mapped[float | None] = mapped_column(Float)
    step_s_iqr: Mapped[float | None] = mapped_column(Float)
    timed_steps: Mapped[int | None]
    warmup_steps: Mapped[int | None]
    flops_per_step: Mapped[float | None] = mapped_column(Float)
    mfu: Mapped[float | None] = mapped_column(Float)
    # since 0004 (None before): how well the rate is known, and where the trial's time went
    step_s_ci95: Mapped[float | None] = mapped_column(Float)
    stopped: Mapped[str | None] = mapped_column(String(20))
    setup_s: Mapped[float | None] = mapped_column(Float)
    first_step_s: Mapped[float | None] = mapped_column(Float)
    warmup_s: Mapped[float | None] = mapped_column(Float)
    timing_s: Mapped[float | None] = mapped_column(Float)
    # since 0009 (None before): others' share of the CPUs while the steps were timed
    machine_load: Mapped[float | None] = mapped_column(Float)
    # since 0010: advisor's measurement, or the user's training run (result.Kind), and the
    # id of the measured trial a training run followed (its prediction; not a foreign key:
    # adding one rebuilds a SQLite table); a training run's row is rewritten as the run goes
    kind: Mapped[str] = mapped_column(String(20), server_default="measured")
    follows_id: Mapped[int | None]
    # since 0011: the job's GPUs (a trial measured one rank of them) and how they share the
    # model; 1 and NULL for one GPU
    gpus: Mapped[int] = mapped_column(server_default="1")
    strategy: Mapped[str | None] = mapped_column(String(20))
    # since 0012 (None before, and on one GPU): the bytes rank 0's collectives carried in a
    # step, by kind, how many ran and the largest (result.Throughput)
    all_reduce_bytes: Mapped[int | None] = mapped_column(BigInteger)
    all_gather_bytes: Mapped[int | None] = mapped_column(BigInteger)
    reduce_scatter_bytes: Mapped[int | None] = mapped_column(BigInteger)
    collectives: Mapped[int | None]
    largest_collective_bytes: Mapped[int | None] = mapped_column(BigInteger)


class SweepRow(Base):
    """One sweep: what it searched for. Re-running the same command finds it by key and resumes."""

    __tablename__ = "sweeps"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)  # also the Optuna study's name
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
    model: Mapped[str] = mapped_column(String(200))
    target: Mapped[str] = mapped_column(String(200))  # the GPU profile or budget searched for
    target_memory_bytes: Mapped[int] = mapped_column(BigInteger)
    margin: Mapped[float] = mapped_column(Float)
    effective_batch_size: Mapped[int | None]
    stop_reason: Mapped[str | None] = mapped_column(Text)  # None while running or interrupted
    # the settings it was begun with, as KEY=VALUE overrides in JSON; None before 0009
    arguments: Mapped[str | None] = mapped_column(Text)


class SweepTrialRow(Base):
    """A trial a sweep used: measured for it, or reused from history (several sweeps may)."""

    __tablename__ = "sweep_trials"

    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"), primary_key=True)
    position: Mapped[int]  # the order in which the sweep used it
    reused: Mapped[bool]
    # measured again for the answer (the answer is measured twice at least), not for the search
    repeat: Mapped[bool] = mapped_column(server_default=false())


class SweepClaimRow(Base):
    """A spec a process is measuring for a sweep (or its answer's repeat), so that no other
    process that runs the same sweep measures it too; kept alive by its owner's heartbeat."""

    __tablename__ = "sweep_claims"

    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)  # a spec hash, or answer-...
    owner: Mapped[str] = mapped_column(String(200))  # host:pid:token
    heartbeat_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
