"""The loop's timing policy on a fake clock: decisions at once, the full pass at most every
full_pass_seconds and once the changes pause, never later than the resync allows, and what
only statuses show left to the resync."""

from __future__ import annotations

import pytest

from sluice.operator.pacing import LOOK_AGAIN_SECONDS, Pacing, Timing


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pacing(full_pass: float = 5.0, resync: float = 10.0) -> tuple[Pacing, Clock]:
    clock = Clock()
    return Pacing(Timing(resync_seconds=resync, full_pass_seconds=full_pass), clock), clock


def urgent_change(found: Pacing, clock: Clock) -> bool:
    """A change that may let a job in, arriving now and waking the loop at once."""
    found.woken(urgent=True, urgent_since=clock.now)
    return found.decides(changed=True, urgent=True)


def test_a_change_that_may_let_a_job_in_is_decided_at_once_and_explained_later() -> None:
    found, clock = pacing()
    assert urgent_change(found, clock)
    assert found.full_due_now()  # the first full pass: at once
    clock.now += 0.1
    assert urgent_change(found, clock)  # decided at once, full pass running or not
    assert not found.full_due_now()
    assert found.until_due(leading=True, full_running=False) == pytest.approx(4.9)
    clock.now += 4.8
    assert not found.full_due_now()
    clock.now += 0.1
    assert found.full_due_now()  # full_pass_seconds after the last one started
    assert not found.full_due_now()  # nothing changed since: no other one
    assert found.until_due(leading=True, full_running=False) == 10.0


def test_the_full_pass_waits_for_a_pause_in_the_changes() -> None:
    """A stream of changes, one every 0.05 s for 3 s: decided one by one; the next full pass
    waits until they pause for a fifth of full_pass_seconds (0.4 s), not beside every
    decision."""
    found, clock = pacing(full_pass=2.0)
    assert urgent_change(found, clock) and found.full_due_now()
    started = clock.now
    explained = 0
    while clock.now < started + 3.0:
        clock.now += 0.05
        assert urgent_change(found, clock)
        explained += found.full_due_now()
    assert explained == 0
    last = clock.now
    clock.now = last + 0.39
    assert not found.full_due_now()
    assert found.until_due(leading=True, full_running=False) == pytest.approx(0.01)
    clock.now = last + 0.4
    assert found.full_due_now()


def test_the_full_pass_waits_for_a_pause_no_longer_than_the_resync() -> None:
    """Changes every 0.02 s, never a pause of 0.1 s: a full pass all the same, the resync
    (1 s) after the earliest it could have started."""
    found, clock = pacing(full_pass=0.5, resync=1.0)
    assert urgent_change(found, clock) and found.full_due_now()
    first = clock.now
    while not found.full_due_now():
        clock.now += 0.02
        urgent_change(found, clock)
        assert clock.now - first < 2.0
    assert clock.now - first == pytest.approx(1.5, abs=0.021)


def test_a_change_only_statuses_show_is_left_to_the_resyncs_full_pass() -> None:
    """The answers to a pass's own writes (a reason written for every waiting job) start
    neither a decision pass nor a full pass: they decide nothing. The resync explains them."""
    found, clock = pacing(full_pass=0.1, resync=10.0)
    assert urgent_change(found, clock) and found.full_due_now()
    for _ in range(3):
        clock.now += 0.2
        found.woken(urgent=False, urgent_since=0.0)
        assert not found.decides(changed=True, urgent=False)
        assert not found.full_due_now()
    assert found.waited == 0.0
    clock.now += 10.0  # the resync
    assert found.decides(changed=False, urgent=False)
    assert found.full_due_now()
    clock.now += 0.2
    assert urgent_change(found, clock)  # one that may let a job in: explained again,
    assert not found.full_due_now()
    clock.now += 0.02  # once the changes pause for a fifth of full_pass_seconds
    assert found.full_due_now()


def test_a_full_pass_that_found_decisions_not_taken_gets_a_decision_pass() -> None:
    found, clock = pacing()
    assert urgent_change(found, clock)
    clock.now += 1
    assert not found.decides(changed=True, urgent=False)
    found.decide_again()
    assert found.decides(changed=True, urgent=False)
    assert not found.decides(changed=True, urgent=False)  # once


def test_a_failed_full_pass_is_due_again() -> None:
    found, clock = pacing(full_pass=1.0)
    assert urgent_change(found, clock) and found.full_due_now()
    clock.now += 1.0
    assert not found.full_due_now()
    found.full_again()
    assert found.full_due_now()


def test_the_loop_sleeps_until_what_is_due() -> None:
    found, clock = pacing(full_pass=5.0, resync=10.0)
    assert found.until_due(leading=False, full_running=False) == 10.0  # a follower: the resync
    assert found.until_due(leading=True, full_running=True) == LOOK_AGAIN_SECONDS
    assert found.until_due(leading=True, full_running=False) == 0.0  # the first: at once
    assert urgent_change(found, clock) and found.full_due_now()
    clock.now += 2
    found.woken(urgent=True, urgent_since=clock.now - 0.5)
    assert found.waited == 0.5
    assert found.decides(changed=True, urgent=True)
    assert found.until_due(leading=True, full_running=False) == pytest.approx(3.0)


def test_the_configuration_is_read_at_the_first_wake_then_each_resync() -> None:
    found, clock = pacing(resync=10.0)
    assert found.config_due()
    found.config_read()
    clock.now += 10.0
    assert not found.config_due()
    clock.now += 0.1
    assert found.config_due()
    found.config_read()
    found.config_unread()  # it could not be read: read again at the next wake
    assert found.config_due()
