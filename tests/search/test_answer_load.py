"""The answer on a machine that other work loaded: a rate taken under another load than the
answer's is measured again before the answer is held against it, and what could not be is said
(issue 30: "3.90x faster" than the user's settings was the load, not the settings)."""

from __future__ import annotations

import dataclasses
import io

from fake_backend import ENVIRONMENT, fake_result
from rich.console import Console

from advisor.config import load, trial_spec
from advisor.result import Status
from advisor.search.answer import Answer
from advisor.spec import Precision, TrialSpec
from advisor.store.sharing import Alone
from advisor.store.store import Store
from advisor.target import target_for

TARGET = target_for(None, "40GiB", 0.05, trial_spec(load(["model=resnet50"])).device)


def setting(batch_size: int, precision: str = "bf16") -> TrialSpec:
    spec = trial_spec(load(["model=resnet50", "device=cpu"]))
    return dataclasses.replace(spec, batch_size=batch_size, precision=Precision(precision))


class Machine:
    """A backend whose settings run at a rate of their own, measured while the machine is
    loaded as it is now (`load`): busy by `load`, each runs at (1 - load) of its idle rate
    (unless not `slowed`)."""

    def __init__(
        self, store: Store, idle_rates: dict[int, float], load: float, slowed: bool = True
    ) -> None:
        self.store, self.idle_rates, self.load, self.slowed = store, idle_rates, load, slowed
        self.measured: list[TrialSpec] = []

    def measure(self, spec: TrialSpec, repeat: bool = False):
        assert repeat  # the answer's measurements are linked as its repeats
        self.measured.append(spec)
        return self.keep(spec, self.load)

    def keep(self, spec: TrialSpec, load: float | None):
        result = fake_result(spec)
        rate = self.idle_rates[spec.batch_size] * (1 - (load or 0.0) * self.slowed)
        step_s = spec.effective_batch_size / rate
        throughput = dataclasses.replace(
            result.throughput, samples_per_s=rate, step_s_median=step_s, machine_load=load
        )
        return self.store.add(dataclasses.replace(result, throughput=throughput))


def answer_on(machine: Machine) -> Answer:
    return Answer(
        machine.store, machine, lambda slot, spec: None, None, ENVIRONMENT.device_name,
        ENVIRONMENT.torch, Alone(),
    )  # fmt: skip


def test_settings_measured_under_another_load_are_measured_again_before_comparing(tmp_path):
    """The baseline (b64) and a runner-up (b32) were measured while others used 90% of the
    CPUs, the rest on an idle machine: b128 looked 9x faster than the baseline. Measured again
    under the idle machine, b64 is the fastest, and the answer is held against it at its idle
    rate."""
    store = Store(f"sqlite:///{tmp_path / 'results.sqlite'}")
    idle = {32: 300.0, 64: 440.0, 128: 430.0, 256: 380.0}
    machine = Machine(store, idle, load=0.0)
    baseline = machine.keep(setting(64), 0.9)  # 44/s: the machine was busy
    results = [
        baseline,
        machine.keep(setting(32), 0.9),
        machine.keep(setting(256), 0.0),
        machine.keep(setting(128), 0.0),
    ]
    answer = answer_on(machine)

    rec, results = answer.settle(results, TARGET, None, baseline.spec)

    assert rec.best is not None and rec.best.spec.batch_size == 64
    assert rec.best.throughput.machine_load == 0.0 and rec.best.samples_per_s == 440.0
    again = {old.spec.batch_size: new for old, new in answer.again}
    assert set(again) == {32, 64}  # the two loaded rates, each measured once again
    assert all(new.throughput.machine_load == 0.0 for new in again.values())
    # the answer (b64) counts by its measurements under the load of now; all of them are said,
    # the busy machine's too (their spread is the repeats line's)
    assert {r.spec.batch_size for r in answer.repeats} == {64}
    assert sorted(r.throughput.machine_load for r in answer.repeats) == [0.0, 0.0, 0.9]
    shown = answer.baseline(baseline, results, TARGET)
    assert shown.samples_per_s == 440.0  # not the 44/s of the busy machine
    check = answer.load_check(results, TARGET)
    assert check is not None and check.load_now == 0.0 and check.apart == []
    assert [(old.id, new.id) for old, new in check.measured_again] == [
        (old.id, new.id) for old, new in answer.again
    ]


def test_what_is_not_compared_again_is_said(tmp_path):
    """Beyond the runners-up shown, a fitting setting whose rate was taken under another load
    is not measured again: the check names it."""
    store = Store(f"sqlite:///{tmp_path / 'results.sqlite'}")
    rates = {16: 100.0, 32: 200.0, 64: 300.0, 128: 400.0, 256: 500.0, 512: 600.0}
    machine = Machine(store, rates, load=0.0)
    results = [machine.keep(setting(16), 0.5)]  # the slowest, under load: not among those shown
    results += [machine.keep(setting(b), 0.0) for b in (32, 64, 128, 256, 512)]
    answer = answer_on(machine)

    rec, results = answer.settle(results, TARGET, None)

    assert rec.best is not None and rec.best.spec.batch_size == 512
    assert [s.batch_size for s in machine.measured] == [512]  # the answer's repeat alone
    check = answer.load_check(results, TARGET)
    assert check is not None and check.measured_again == []
    assert [r.spec.batch_size for r in check.apart] == [16]


def test_rates_of_one_load_or_of_unknown_load_are_compared_as_they_are(tmp_path):
    """A busy machine throughout (loads within the noise), or trials stored before loads were
    (None): nothing is measured again for the load, and nothing is said."""
    store = Store(f"sqlite:///{tmp_path / 'results.sqlite'}")
    rates = {32: 200.0, 64: 300.0, 128: 400.0}
    machine = Machine(store, rates, load=0.55, slowed=False)  # (as its load was throughout)
    baseline = machine.keep(setting(32), None)
    results = [baseline, machine.keep(setting(64), 0.5), machine.keep(setting(128), 0.6)]
    answer = answer_on(machine)

    rec, results = answer.settle(results, TARGET, None, baseline.spec)

    assert rec.best is not None and rec.best.spec.batch_size == 128
    assert [s.batch_size for s in machine.measured] == [128]
    assert answer.again == [] and answer.load_check(results, TARGET) is None


def test_the_load_of_now_is_the_newest_known_one(tmp_path):
    """The newest trial is often one that ran out of memory (the climb's last), which has no
    load: the load of now is the newest known one, and the loaded baseline is still measured
    again (it was taken as unknown, and nothing was compared with care)."""
    store = Store(f"sqlite:///{tmp_path / 'results.sqlite'}")
    idle = {32: 300.0, 64: 440.0, 128: 430.0}
    machine = Machine(store, idle, load=0.0)
    baseline = machine.keep(setting(64), 0.9)
    results = [baseline, machine.keep(setting(128), 0.0), machine.keep(setting(32), 0.0)]
    failed = dataclasses.replace(fake_result(setting(128)), status=Status.oom, throughput=None)
    results.append(store.add(failed))
    answer = answer_on(machine)

    rec, results = answer.settle(results, TARGET, None, baseline.spec)

    assert answer.load_now == 0.0
    assert [old.spec.batch_size for old, _ in answer.again] == [64]
    assert rec.best is not None and rec.best.spec.batch_size == 64


def shown(renderable) -> str:
    """What a line says on a wide terminal."""
    console = Console(file=io.StringIO(), width=300, record=True)
    console.print(renderable)
    return console.export_text().strip()


def test_the_load_lines_name_what_was_measured_again_and_what_was_not(tmp_path):
    """The report of the check: each measurement made again, from and to which load; the
    settings not measured again, their loads as a range in order (5% before 35%, not as text)."""
    from advisor.report.sweep_report import load_lines
    from advisor.search.answer import LoadCheck

    store = Store(f"sqlite:///{tmp_path / 'results.sqlite'}")
    machine = Machine(store, {16: 100.0, 32: 200.0, 64: 300.0}, load=0.0)
    old, new = machine.keep(setting(32), 0.9), machine.keep(setting(32), 0.0)
    apart = [machine.keep(setting(16), 0.35), machine.keep(setting(64), 0.05)]
    said = [shown(line) for line in load_lines(LoadCheck(0.2, [(old, new)], apart))]
    assert said[0].startswith("measured again under the load of now: batch 32, bf16")
    assert f"while others used 90% of the CPUs (trial {old.id})" in said[0]
    assert f"at 0% (trial {new.id})" in said[0]
    assert said[1] == (
        "caution: 2 fitting settings were ranked by rates taken while others used 5% to 35% of "
        "the CPUs (the answer's: 20%): compare them with care"
    )
    assert load_lines(None) == []


def test_a_setting_counts_by_its_newest_loads_rates(tmp_path):
    """A newcomer's resumed sweep: one setting measured 1,468/s with others at 53%, then 247
    and 257/s at 66%; its figure was the 1,468 (a median across loads). Rates under other loads
    are not pooled: it counts by its newest load's, 247/s (the lower of the middle two)."""
    from advisor.recommendation import one_per_setting

    store = Store(f"sqlite:///{tmp_path / 'results.sqlite'}")
    machine = Machine(store, {32: 1468.0}, load=0.0, slowed=False)
    early = [machine.keep(setting(32), 0.25), machine.keep(setting(32), 0.53)]
    late = [machine.keep(setting(32), 0.66), machine.keep(setting(32), 0.66)]
    late = [
        store.add(dataclasses.replace(r, throughput=dataclasses.replace(r.throughput,
                                                                        samples_per_s=rate)))
        for r, rate in zip(late, (257.0, 247.0), strict=True)
    ]  # fmt: skip
    [counted] = one_per_setting([*early, *late], TARGET)
    assert counted.samples_per_s == 247.0 and counted.throughput.machine_load == 0.66


def test_a_setting_measured_after_the_answer_is_not_measured_again_on_resume(tmp_path):
    """A runner-up measured again after the answer's repeats, and still under another load
    (the machine's load moved), is as near the answer as it gets: a resumed sweep measures
    nothing for it (it did each time, so a resume measured more than its search had), and the
    caution line names it."""
    store = Store(f"sqlite:///{tmp_path / 'results.sqlite'}")
    machine = Machine(store, {32: 300.0, 64: 440.0}, load=0.0)
    results = [machine.keep(setting(32), 0.9)]  # the search's, under load
    results += [machine.keep(setting(64), 0.0), machine.keep(setting(64), 0.0)]  # the answer's
    results.append(machine.keep(setting(32), 0.5))  # measured again: the load had moved
    answer = answer_on(machine)

    rec, results = answer.settle(results, TARGET, None)

    assert rec.best is not None and rec.best.spec.batch_size == 64
    assert machine.measured == [] and answer.again == []
    check = answer.load_check(results, TARGET)
    assert check is not None and [r.throughput.machine_load for r in check.apart] == [0.5]
