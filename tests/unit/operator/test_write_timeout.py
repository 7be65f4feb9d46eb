"""The rule that bounds every write in time (docs/operations.md, "A replica that loses its
Lease"): a write sent while the replica holds the Lease ends before another may take it."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from sluice.operator.leader import LeaseElector


@pytest.mark.parametrize(("lease", "renew"), [(15, 5), (15, 2), (30, 10), (2, 1), (15, 12)])
def test_a_write_sent_while_holding_ends_before_another_replica_may_take_the_lease(
    lease: int, renew: float
) -> None:
    elector = LeaseElector(client.ApiClient(), "ns", "l", "me", lease, renew)
    elector.is_leader = True
    now = time.monotonic()
    # The last moment a write may still be sent: holds() is True just before it, not after.
    last_send = lease - renew
    elector.renewed_at = now - (last_send - 0.01)
    assert elector.holds()
    elector.renewed_at = now - (last_send + 0.01)
    assert not elector.holds()
    # Another replica may take the Lease once lease seconds have passed since the renewal.
    assert elector.write_timeout > 0
    assert last_send + elector.write_timeout < lease
