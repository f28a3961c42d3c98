"""A job's step on several GPUs from one rank's (advisor/communication.py): the model's
arithmetic, worked by hand; the link a GPU's profile or the user's nccl-tests figure gives,
and bad nodes= as one line; `advisor run gpus=N` showing the job's step, measured and modelled
parts apart."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from conftest import FAST_OVERRIDES, spec_of
from rich.console import Console
from test_cli import advisor as command
from test_cli import trial_count

import advisor
from advisor import communication, config, queries
from advisor.communication import job_step
from advisor.emit.trainers import trainer_config
from advisor.errors import ConfigError
from advisor.interconnect import Interconnect, interconnect
from advisor.report import tables
from advisor.result import Environment, Kind, Status, Throughput, TrialResult
from advisor.spec import Strategy
from advisor.store.store import Store

FAST_MEASURE = {"min_timed_steps": 3, "max_timed_steps": 5, "max_timed_s": 2}
LINK = Interconnect(within=100e9, between=None, nodes=1, says="a 100 GB/s link")


def rank_rate(step_s: float, **collectives: int) -> Throughput:
    return Throughput(samples_per_s=1.0, tokens_per_s=None, step_s_median=step_s,
                      step_s_iqr=0.0, timed_steps=10, warmup_steps=3, flops_per_step=None,
                      **collectives)  # fmt: skip


def test_ddp_hides_its_buckets_under_the_last_micro_batchs_backward():
    spec = spec_of("model=tiny_mlp", "batch_size=32", "grad_accum=2", "gpus=8")
    rank = rank_rate(0.1, all_reduce_bytes=10**9, collectives=40, largest_collective_bytes=25e6)
    job = job_step(spec, rank, LINK)
    wire = 2 * 7 / 8 * 1e9 / 100e9  # 17.5 ms: a ring all-reduce moves 2(N-1)/N of the buffer
    last = 2 * 7 / 8 * 25e6 / 100e9  # the last bucket, after the backward that made it
    assert job.communication_s == pytest.approx(wire)
    assert job.hidden_s == pytest.approx(wire - last)  # the rest under 33 ms of backward
    assert job.step_s == pytest.approx(0.1 + last)
    assert job.samples_per_s == pytest.approx(32 * 2 * 8 / (0.1 + last))
    assert job.local_copies_s == 0 and job.compute_s == 0.1  # (no copies: DDP's hook made none)
    # ten times the gradients: the backward's 2/3 of a micro batch (33 ms) hides no more
    big = job_step(spec, dataclasses.replace(rank, all_reduce_bytes=10**10), LINK)
    assert big.hidden_s == pytest.approx(0.1 / 2 * 2 / 3)
    assert big.step_s == pytest.approx(0.1 + 0.175 - 0.1 / 3)


def test_fsdp_takes_the_fake_groups_copies_out_and_hides_all_but_the_largest_gather():
    spec = spec_of("model=tiny_mlp", "gpus=4", "strategy=fsdp")
    rank = rank_rate(0.1, all_gather_bytes=2 * 10**9, reduce_scatter_bytes=10**9,
                     collectives=30, largest_collective_bytes=5 * 10**8)  # fmt: skip
    job = job_step(spec, rank, LINK, copied_at=1e12)  # (the rank's GPU's memory bandwidth)
    # read and written: the gathers' whole output, the reduce-scatters' kept chunk
    assert job.local_copies_s == pytest.approx(2 * (2e9 + 1e9 / 4) / 1e12)
    assert job.compute_s == pytest.approx(0.1 - 0.0045)
    assert job.communication_s == pytest.approx(3e9 * 3 / 4 / 100e9)
    assert job.exposed_s == pytest.approx(5e8 * 3 / 4 / 100e9)  # the first gather
    assert job.step_s == pytest.approx(0.1 - 0.0045 + 0.00375)


def test_hsdp_gathers_within_a_node_and_all_reduces_its_shards_between_nodes():
    spec = spec_of("model=tiny_mlp", "gpus=16", "strategy=hsdp", "nodes=2")
    rank = rank_rate(0.1, all_gather_bytes=2 * 10**9, reduce_scatter_bytes=10**9,
                     all_reduce_bytes=10**9 // 8, collectives=30,
                     largest_collective_bytes=10**8)  # fmt: skip
    link = Interconnect(within=400e9, between=50e9, nodes=2, says="two nodes")
    job = job_step(spec, rank, link)
    inside = 3e9 * 7 / 8 / 400e9  # gathers and scatters over a node's 8 GPUs
    across = 2 * (1e9 / 8) * 1 / 2 / 50e9  # the shards' all-reduce over the 2 nodes
    assert job.communication_s == pytest.approx(inside + across)
    assert job.exposed_s == pytest.approx(1e8 * 7 / 8 / 400e9)  # the first gather, inside
    # FSDP over all 16 GPUs of two nodes: every collective held to the network
    fsdp = job_step(dataclasses.replace(spec, strategy=Strategy.fsdp, replicas=1),
                    dataclasses.replace(rank, all_reduce_bytes=0), link)  # fmt: skip
    assert fsdp.communication_s == pytest.approx(3e9 * 15 / 16 / 50e9)


def test_one_gpu_or_a_rank_without_collectives_is_not_modelled():
    carrying = {"all_reduce_bytes": 10**9, "collectives": 1, "largest_collective_bytes": 10**9}
    one = spec_of("model=tiny_mlp")
    assert job_step(one, rank_rate(0.1, **carrying), LINK) is None  # (no job: one GPU)
    ranks = spec_of("model=tiny_mlp", "gpus=2")
    assert job_step(ranks, rank_rate(0.1), LINK) is None  # stored before 0012
    h200 = config.load(["gpu=h200"]).gpu
    stored = TrialResult(ranks, Status.ok, None, None, rank_rate(0.1), None, 1.0)
    said = communication.modelled(stored, h200, 1)
    assert said.startswith("the rank recorded no collectives")


def test_the_link_is_the_profiles_or_the_users_and_bad_nodes_are_one_line():
    h200 = config.load(["gpu=h200"]).gpu
    assert interconnect(h200, 8, 1).slowest == 460e9
    assert interconnect(h200, 16, 2).slowest == 50e9  # between nodes: the network's
    assert interconnect(h200, 16, 2).within == 460e9  # (hsdp's gathers, inside a node)
    mine = config.load(["gpu=h200", "gpu.intra_node_busbw=380"]).gpu
    said = "within a node at 380 GB/s (h200's gpu.intra_node_busbw)"
    assert interconnect(mine, 8, 1).says == said
    # gpu=auto: the profile of the GPU the rank ran on, or none
    auto = config.load([]).gpu
    assert interconnect(auto, 4, 1, device_name="NVIDIA H200").slowest == 460e9
    with pytest.raises(ConfigError, match="no GPU is named whose interconnect to model: give gpu"):
        interconnect(auto, 4, 1, device_name="CPU: AMD EPYC")
    with pytest.raises(ConfigError, match="^l4 has no published bus bandwidth within a node: give"):
        interconnect(config.load(["gpu=l4"]).gpu, 4, 1)
    assert (
        interconnect(config.load(["gpu=l4", "gpu.intra_node_busbw=20"]).gpu, 4, 1).slowest == 20e9
    )
    bad = {
        (16, 1): "gpus=16 over nodes=1 is 16 a node, and a h200 node holds 8: give nodes=2",
        (6, 4): "gpus=6 over nodes=4 is uneven: give a multiple of 4",
        (1, 2): "nodes= spreads a job's GPUs over machines: give gpus=N too",
        (8, 0): "nodes must be a positive integer, got 0",
    }
    for (gpus, nodes), said in bad.items():
        with pytest.raises(ConfigError, match=f"^{said}$"):
            interconnect(h200, gpus, nodes)
    with pytest.raises(ConfigError, match="gpu.intra_node_busbw='fast': give GB/s as a positive"):
        interconnect(config.load(["gpu=h200", "gpu.intra_node_busbw=fast"]).gpu, 8, 1)


def test_run_shows_the_jobs_step_and_refuses_a_node_too_small(db_url):
    args = ["run", "model=tiny_mlp", "device=cpu", "batch_size=16", "gpus=4", "strategy=fsdp",
            "gpu=h200", *FAST_OVERRIDES]  # fmt: skip
    shown = command(*args, "--json", db_url=db_url)
    assert shown.returncode == 0, shown.stderr
    result = json.loads(shown.stdout)
    job, rate = result["job"], result["throughput"]
    share = 3 / 4 / 460e9  # (N-1)/N of each full buffer, at the H200's published busbw
    wire = (rate["all_gather_bytes"] + rate["reduce_scatter_bytes"]) * share
    assert job["communication_s"] == pytest.approx(wire) and wire > 0
    assert job["measured_s"] == rate["step_s_median"]
    assert job["step_s"] == pytest.approx(job["compute_s"] + wire - job["hidden_s"])
    assert job["samples_per_s"] == pytest.approx(16 * 4 / job["step_s"])
    assert "within a node at 460 GB/s (h200's gpu.intra_node_busbw)" in job["how"]
    text = command(*args, db_url=db_url)
    assert "the job on 4 GPUs: " in text.stdout and "(modelled)" in text.stdout
    # show: the stored rank's job, over the published link of the GPU it ran on
    shown = command("show", str(result["id"]), db_url=db_url)
    assert re.search(r"the job's step is not modelled: CPU: .* has no published bus", shown.stdout)
    (stored,) = [r for r in advisor.history(db_url=db_url) if r.id == result["id"]]
    on_h200 = dataclasses.replace(stored, environment=dataclasses.replace(
        stored.environment, device_name="NVIDIA H200"))  # fmt: skip

    def shown_as(trial: TrialResult) -> str:
        view = Console(width=100, record=True)
        view.print(tables.trial_view(trial))
        return view.export_text()

    within = shown_as(on_h200)
    assert "the job on 4 GPUs: " in within
    assert "within a node at 460 GB/s (h200's gpu.intra_node_busbw)" in within
    sixteen = dataclasses.replace(on_h200, spec=dataclasses.replace(on_h200.spec, gpus=16))
    assert "between 2 nodes at 50 GB/s" in shown_as(sixteen)  # (the fewest nodes holding 16)
    unrecorded = dataclasses.replace(  # a rank stored before its collectives were recorded
        on_h200, throughput=dataclasses.replace(on_h200.throughput, collectives=None)
    )
    assert "not modelled: the rank recorded no collectives" in shown_as(unrecorded)
    run = dataclasses.replace(on_h200, kind=Kind.training, follows=on_h200.id)
    assert "the job on" not in shown_as(run) and "not modelled" not in shown_as(run)
    # a GPU with no published figure: measured and stored all the same, and said why
    l4 = command(*args[:-4], "gpu=l4", *FAST_OVERRIDES, db_url=db_url)
    assert l4.returncode == 0 and "the job's step is not modelled: l4 has no published" in l4.stdout
    before = trial_count(db_url)
    for extra, said in (
        (["gpus=16"], "gpus=16 over nodes=1 is 16 a node, and a h200 node holds 8: give nodes=2"),
        (["gpus=1", "strategy=null"], "gpu= does not apply to run"),
        (["gpu.intra_node_busbw=fast"], "gpu.intra_node_busbw='fast': give GB/s as a positive"),
    ):
        refused = command(*args, *extra, db_url=db_url)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    assert trial_count(db_url) == before


def test_recommend_ranks_a_jobs_settings_by_their_modelled_step(db_url):
    """recommend gpus=N answers from the stored ranks of jobs on N GPUs, each as the whole job:
    over a slow link the setting that moves fewer bytes wins, and the answer's rate is its
    modelled job's, said as such, with the lines torchrun runs."""
    for strategy, batch in (("ddp", 16), ("fsdp", 16), ("ddp", 8)):
        advisor.run("tiny_mlp", device="cpu", gpus=4, strategy=strategy, batch_size=batch,
                    db_url=db_url, measure=FAST_MEASURE)  # fmt: skip
    slow = {"memory": "64MiB", "intra_node_busbw": 0.001}  # 1 MB/s: the wire decides
    rec = advisor.recommend("tiny_mlp", device="cpu", gpus=4, gpu=slow, db_url=db_url)
    assert rec.considered == 3 and rec.best.job is not None
    ranked = [rec.best, *rec.runners_up]
    assert [r.samples_per_s for r in ranked] == sorted(
        (r.samples_per_s for r in ranked), reverse=True
    )
    # DDP all-reduces its gradients once (2 x 3/4 of them on the wire); FSDP gathers and
    # scatters them (each 3/4): 1.5x DDP's bytes and more, so at 1 MB/s DDP is faster
    assert rec.best.spec.strategy.value == "ddp"
    for r in ranked:
        job = r.job
        assert r.samples_per_s == pytest.approx(r.spec.effective_batch_size / job.step_s)
        assert job.step_s == pytest.approx(job.compute_s + job.communication_s - job.hidden_s)
        assert job.step_s > job.measured_s  # at 1 MB/s the wire shows
    stored = advisor.history(model="tiny_mlp", gpus=4, db_url=db_url)
    assert len(stored) == 3 and {r.job for r in stored} == {None}  # the ranks', unmodelled
    assert {r.samples_per_s for r in stored}.isdisjoint(r.samples_per_s for r in ranked)
    emitted = rec.emit("torch").text
    assert "torchrun --nproc_per_node=4 train.py" in emitted
    assert "model = DistributedDataParallel(model)" in emitted
    for bad, said in (
        ({"effective_batch_size": 63}, "effective_batch_size=63 over gpus=4 is uneven"),
        ({"strategy": "hsdp"}, 'strategy="hsdp" shards within each node and replicates'),
    ):  # (in Python's words: the API's errors name its keyword arguments)
        with pytest.raises(ConfigError, match=f"^{said}"):
            advisor.recommend("tiny_mlp", device="cpu", gpus=4, gpu=slow, db_url=db_url, **bad)
    with pytest.raises(ConfigError, match="^no GPU is named whose interconnect to model"):
        advisor.recommend("tiny_mlp", device="cpu", gpus=4, gpu={"memory": "64MiB"},
                          db_url=db_url)  # fmt: skip


def test_a_trainer_that_does_not_spread_a_job_yet_is_one_line():
    spec = spec_of("model=tiny_mlp", "gpus=2")
    with pytest.raises(ConfigError, match="^emit=hf of a job on 2 GPUs is not written yet: emit"):
        trainer_config(spec, "hf")


def test_a_sweep_of_a_job_searches_its_strategy_and_ranks_by_the_jobs_step(db_url, tmp_path):
    """sweep gpus=N: one rank of each setting measured, each ranked as its whole job over the
    link, its largest batch predicted by the rank's estimate; the answer says what is modelled
    and prints the torchrun lines; a global batch the GPUs cannot share evenly is one line
    before anything runs."""
    sweep = ["sweep", "model=tiny_mlp", "device=cpu", "gpu.memory=64MiB", "gpus=2",
             "gpu.intra_node_busbw=0.01", "trials=4", "space.batch_sizes=[64,256]",
             "space.precision=[fp32]", "space.compile=[false]", "space.optimizers=[adamw]",
             f"study_db_url=sqlite:///{tmp_path / 'optuna.sqlite'}", *FAST_OVERRIDES]  # fmt: skip
    ran = command(*sweep, "--json", db_url=db_url)
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)
    best = answer["recommendation"]
    assert best["spec"]["gpus"] == 2 and best["job"]["step_s"] > best["job"]["compute_s"]
    assert best["throughput"]["samples_per_s"] == pytest.approx(best["job"]["samples_per_s"])
    ranked = [best, *answer["runners_up"], *answer["pareto_front"]]
    assert all(r["job"]["samples_per_s"] == r["throughput"]["samples_per_s"] for r in ranked)
    assert re.search(r"job [\d,]+\.\d/s \(modelled\), peak", ran.stderr)  # each step's says so
    # the rank's fake-tensor estimate predicts each setting's largest micro batch, as one GPU's
    predicted = answer["largest_batches"]
    assert predicted and {b["by"] for b in predicted} == {"estimate"}
    # the dashboard's and the API's answer for the sweep: the same, over the link it was
    # begun with (its stored arguments)
    store = Store(db_url)
    ((found, _),) = store.sweeps()
    served = queries.sweep_recommendation(found, store.sweep_trials(found.id))
    assert served.best.spec.hash == best["spec"]["hash"]
    assert served.best.samples_per_s == pytest.approx(best["job"]["samples_per_s"])
    stored = advisor.history(model="tiny_mlp", gpus=2, db_url=db_url)
    assert stored and all(r.job is None and r.spec.gpus == 2 for r in stored)  # the ranks'
    assert {r.spec.strategy.value for r in stored} == {"ddp", "fsdp"}  # the strategy: an axis
    emitted = command(*sweep, "emit=torch", db_url=db_url)  # (resumed: nothing measured)
    assert emitted.returncode == 0 and "torchrun --nproc_per_node=2 train.py" in emitted.stdout
    assert len(advisor.history(model="tiny_mlp", gpus=2, db_url=db_url)) == len(stored)
    before = len(advisor.history(db_url=db_url))
    hf = command(*sweep, "emit=hf", db_url=db_url)  # (said before the search, not after it)
    assert hf.returncode == 2 and "emit=hf of a job on 2 GPUs is not written yet" in hf.stderr
    assert len(advisor.history(db_url=db_url)) == before
    uneven = command(*sweep, "effective_batch_size=63", db_url=db_url)
    assert uneven.returncode == 2
    assert uneven.stderr.strip() == (
        "advisor: effective_batch_size=63 over gpus=2 is uneven: give a multiple of 2"
    )


def test_a_jobs_training_run_is_held_to_the_jobs_modelled_step():
    """A run of the user's job on several GPUs, beside the rank trial it followed: compared
    with the job's modelled rate over its GPUs' published link, and said to be; where the
    run's GPU has no published link, with the rank's own rate, and said to be."""
    spec = spec_of("model=tiny_mlp", "batch_size=32", "gpus=8")
    rank = rank_rate(0.1, all_reduce_bytes=10**9, collectives=4, largest_collective_bytes=10**8)
    h200 = Environment("NVIDIA H200", 150754820096, "580", "13.0", "2.11.0", "0", "3.12", "h")
    followed = TrialResult(spec, Status.ok, h200, None, rank, None, 1.0, id=1)
    real = dataclasses.replace(rank, samples_per_s=2000.0)
    run = dataclasses.replace(followed, id=2, kind=Kind.training, follows=1, throughput=real)
    job = communication.as_followed(followed, run)
    assert job.job is not None and job.samples_per_s == job.job.samples_per_s < 32 * 8 / 0.1
    (caption,) = tables.against_prediction([job, run])
    assert f"samples/s {2000 / job.samples_per_s - 1:+.1%}" in caption
    assert caption.endswith("; its rate is the job's, modelled within a node at 460 GB/s "
                            "(h200's gpu.intra_node_busbw)")  # fmt: skip
    cpu = dataclasses.replace(h200, device_name="CPU: AMD EPYC")
    on_cpu = dataclasses.replace(run, environment=cpu)
    assert communication.as_followed(followed, on_cpu) is followed
    (caption,) = tables.against_prediction([followed, on_cpu])
    assert caption.endswith("; its rate is the rank's: no published link to model the job's "
                            "communication over")  # fmt: skip
