"""Run several `trainer.train()` calls in lockstep, one optimizer step each in turn, and time every step.

Why: this machine's speed drifts by 20-30% within minutes (other tenants of the host), so arms
timed in separate rounds of a dozen steps each compare different machines. In lockstep, step i
of every arm runs within one rotation (a few seconds) of the others, so the ratio of two arms'
step i cancels the drift, and the median of those paired ratios is the arm-to-arm cost ratio.

Each arm runs its real `train()` in a thread of its own; a callback hands a single turn from arm
to arm at every `on_step_begin`, so an arm keeps the turn from one step's start to the next (the
step, and the data loading and bookkeeping between steps): only one arm computes at any time.
An arm that finishes leaves the rotation. The steps before each arm's first timed step
(`warmup`) are dropped, since the other threads are still setting up their trainers then.
"""

from __future__ import annotations

import statistics
import threading
import time

from transformers import TrainerCallback


class _Turns:
    """Whose turn it is among the arms still training."""

    def __init__(self, count: int):
        self.condition = threading.Condition()
        self.active = list(range(count))
        self.turn = 0

    def wait(self, arm: int) -> None:
        with self.condition:
            self.condition.wait_for(lambda: self.turn == arm)

    def pass_on(self, arm: int, leave: bool = False) -> None:
        with self.condition:
            position = self.active.index(arm)
            if leave:
                self.active.remove(arm)
            if self.active:
                self.turn = self.active[(position + (0 if leave else 1)) % len(self.active)]
            self.condition.notify_all()


class LockstepTimer(TrainerCallback):
    """Holds its arm's turn from one `on_step_begin` to the next and times each turn.

    A turn is one optimizer step plus the loading of the next batch and the loop's bookkeeping
    (the trainer fetches a batch before `on_step_begin`), so every arm's data work is timed and
    never overlaps another arm's step. The last turn (which includes the end of training) is not
    recorded.
    """

    def __init__(self, turns: _Turns, arm: int):
        self.turns, self.arm = turns, arm
        self.times: list[float] = []
        self._start: float | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.turns.wait(self.arm)

    def on_step_begin(self, args, state, control, **kwargs):
        if self._start is not None:  # every step but the first: close this turn, let the other arms step
            self.times.append(time.perf_counter() - self._start)
            self.turns.pass_on(self.arm)
            self.turns.wait(self.arm)
        self._start = time.perf_counter()

    def on_train_end(self, args, state, control, **kwargs):
        self.turns.pass_on(self.arm, leave=True)


def train_in_lockstep(trainers: list) -> list[list[float]]:
    """Seconds per optimizer step of each trainer, all trained at once in strict rotation."""
    turns = _Turns(len(trainers))
    timers = [LockstepTimer(turns, arm) for arm in range(len(trainers))]
    errors: list[BaseException] = []

    def run(trainer, timer):
        try:
            trainer.add_callback(timer)
            trainer.train()
        except BaseException as error:  # re-raised in the caller's thread
            errors.append(error)
            with turns.condition:  # let the others go on without this arm
                if timer.arm in turns.active:
                    turns.active.remove(timer.arm)
                    turns.turn = turns.active[0] if turns.active else -1
                turns.condition.notify_all()

    threads = [threading.Thread(target=run, args=pair, daemon=True) for pair in zip(trainers, timers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [timer.times for timer in timers]


def paired_step_ratio(arm: list[float], reference: list[float], warmup: int = 3) -> dict:
    """Median and quartiles of arm[i] / reference[i] over the steps after `warmup` (steps i ran one rotation apart)."""
    ratios = [a / r for a, r in zip(arm[warmup:], reference[warmup:])]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    return {"measured": statistics.median(ratios), "q1": quartiles[0], "q3": quartiles[2], "steps": len(ratios)}
