"""Build the databases of each earlier schema that test_migrations upgrades (committed beside
this file; run again only to add the newest schema once it, too, is an earlier one):

    python tests/schemas/make.py

Each is made by alembic at its revision and filled as advisor of that schema filled it: one
environment, three trials (ok, oom, crashed) and, from 0002 on, a sweep that used them. Before
0003 a trial's spec named a model node (builder, input, loss); from 0003 a workload."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent))

from advisor.store.schema import MIGRATIONS  # noqa: E402

REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011")
MODEL_NODE = {  # a spec's model as schemas 0001 and 0002 stored it
    "block": "Bottleneck",
    "builder": '{"_target_":"torchvision.models.resnet50"}',
    "family": "cnn",
    "input": {"kind": "image", "num_classes": 1000, "shape": [3, 224, 224]},
    "loss": "classification",
    "name": "resnet50",
}
WORKLOAD = {  # ... and as a workload, from 0003
    "name": "resnet50",
    "source": "advisor.catalog:torchvision_classifier",
    "arguments": '{"block":"Bottleneck","builder":"torchvision.models.resnet50"}',
    "code": "0123456789abcdef",
    "versions": [["torch", "2.11.0"], ["torchvision", "0.26.0"]],
    "block": "Bottleneck",
    "family": "cnn",
    "image_input": True,
    "tokens_per_sample": None,
}


def spec_json(revision: str, batch_size: int) -> str:
    spec = {
        "batch_size": batch_size, "channels_last": False, "checkpointing": "none",
        "compile": False, "device": "cuda", "expandable_segments": False, "grad_accum": 1,
        "memory_cap_bytes": None, "model": MODEL_NODE if revision < "0003" else WORKLOAD,
        "optimizer": {"builder": '{"_partial_":true,"_target_":"torch.optim.AdamW"}',
                      "name": "adamw"},
        "precision": "bf16",
    }  # fmt: skip
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


# (batch, status, figures): what each trial holds, by column
TRIALS = [
    (64, "ok", {"params_bytes": 102_228_128, "context_bytes": 799_014_912,
                "activations_bytes": 3_006_000_000, "grads_bytes": 102_228_128,
                "optimizer_state_bytes": 204_456_256, "inputs_bytes": 38_535_168,
                "peak_allocated_bytes": 4_663_000_000, "peak_reserved_bytes": 5_100_000_000,
                "steady_peak_allocated_bytes": 3_700_000_000,
                "steady_peak_reserved_bytes": 4_000_000_000, "peak_phase": "backward",
                "device_peak_bytes": 5_899_014_912, "nvml_process_bytes": 5_950_000_000,
                "num_alloc_retries": 0, "samples_per_s": 2400.5, "step_s_median": 0.02666,
                "step_s_iqr": 0.0001, "timed_steps": 20, "warmup_steps": 3,
                "flops_per_step": 1.57e12, "mfu": 0.06, "buffers_bytes": 212_992}),
    (4096, "oom", {"failure_phase": "forward", "failure_requested_bytes": 3_288_334_336,
                   "failure_message": "CUDA out of memory. Tried to allocate 3.06 GiB."}),
    (128, "crashed", {"failure_message": "worker exited with code 1\nRuntimeError: boom"}),
]  # fmt: skip


def make(revision: str) -> Path:
    path = HERE / f"{revision}.sqlite"
    path.unlink(missing_ok=True)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with create_engine(f"sqlite:///{path}").begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    db = sqlite3.connect(path)
    columns = {row[1] for row in db.execute("PRAGMA table_info(trials)")}
    db.execute(
        "INSERT INTO environments (id, fingerprint, device_name, device_memory_bytes, driver, "
        "cuda, torch, advisor, python, host) VALUES (1, ?, 'NVIDIA H200', 150754820096, "
        "'580.159.04', '13.0', '2.11.0', '0.1.0', '3.12.3', 'gpu-host')",
        ("f" * 64,),
    )
    for i, (batch, status, figures) in enumerate(TRIALS, start=1):
        row = {
            "id": i, "created_at": f"2026-11-30 10:0{i}:00.000000", "spec_hash": f"{i:016x}",
            "spec_json": spec_json(revision, batch), "model": "resnet50", "family": "cnn",
            "device": "cuda", "batch_size": batch, "grad_accum": 1, "precision": "bf16",
            "checkpointing": "none", "optimizer": "adamw", "channels_last": 0, "compile": 0,
            "expandable_segments": 0, "memory_cap_bytes": None, "status": status,
            "wall_s": 20.0 + i, "environment_id": 1, "fingerprint": "fedcba9876543210",
            "source": WORKLOAD["source"],
            **figures,
        }  # fmt: skip
        row = {k: v for k, v in row.items() if k in columns}  # what the schema has
        names = ", ".join(row)
        db.execute(f"INSERT INTO trials ({names}) VALUES ({', '.join('?' * len(row))})",
                   list(row.values()))  # fmt: skip
    if revision >= "0002":
        db.execute(
            "INSERT INTO sweeps (id, key, created_at, model, target, target_memory_bytes, "
            "margin, effective_batch_size, stop_reason) VALUES (1, ?, '2026-11-30 10:00:00', "
            "'resnet50', 'local NVIDIA H200', 150754820096, 0.05, NULL, 'patience')",
            ("a" * 32,),
        )
        for i in range(1, len(TRIALS) + 1):
            db.execute("INSERT INTO sweep_trials (sweep_id, trial_id, position, reused) "
                       "VALUES (1, ?, ?, 0)", (i, i - 1))  # fmt: skip
    db.commit()
    db.execute("VACUUM")
    db.close()
    return path


if __name__ == "__main__":
    for revision in REVISIONS:
        print(make(revision))
