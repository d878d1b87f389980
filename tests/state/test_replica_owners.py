"""Run ownership on PostgreSQL by PostgreSQL's own locks (state/replicas.py): a replica is alive while its advisory
lock is held, wherever it runs; one that lost its lock writes nothing; one orphan is taken by one replica."""

from __future__ import annotations

import psycopg
import pytest

from abilities_mcp.state.owners import Owner
from abilities_mcp.state.replicas import NotOwner, lock_space
from abilities_mcp.state.store import RunRecord, Store
from postgres_support import wait_for_backend_exit
from support import run_record

# A pid no process here has (above the kernel's pid_max): the owner of a run on another host.
ELSEWHERE_PID = 2**23 + 1


def a_run(run_id: str, owner: Owner) -> RunRecord:
    return run_record(
        run_id,
        owner_pid=owner.pid,
        owner_start=owner.start,
        owner_replica=owner.replica,
        owner_host=owner.host,
    )


@pytest.fixture
def stores(postgres_url):
    opened: list[Store] = []

    def open_one() -> Store:
        opened.append(Store(postgres_url))
        return opened[-1]

    yield open_one
    for store in opened:
        store.close()


def hold_lock_elsewhere(url: str, store: Store, key: int) -> psycopg.Connection:
    """Another host's replica: a connection of its own holding the replica lock `key` of the store's schema."""
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("SELECT pg_advisory_lock(%s, %s)", (lock_space(store.db.database, store.db.schema), key))
    return conn


def test_two_replicas_on_one_schema_see_each_other_alive_and_neither_takes_the_others_runs(stores) -> None:
    one, two = stores(), stores()
    first, second = one.owner(), two.owner()
    assert first.replica != second.replica and first.pid == second.pid  # two replicas in one process, even
    one.create_run(a_run("r1", first))
    two.create_run(a_run("r2", second))

    assert one.orphaned_runs() == [] and two.orphaned_runs() == []
    assert two.owners_alive([first, second]) == [True, True]


def test_an_owner_on_another_host_counts_alive_while_its_lock_is_held_whatever_its_pid_says_here(
    stores, postgres_url
) -> None:
    store = stores()
    elsewhere = Owner(ELSEWHERE_PID, 12345, 424242, "another-host:1")
    store.create_run(a_run("far", elsewhere))
    lock = hold_lock_elsewhere(postgres_url, store, elsewhere.replica)
    backend = lock.info.backend_pid
    try:
        assert store.owner_alive(elsewhere) and store.orphaned_runs() == []
    finally:
        lock.close()  # that replica dies: PostgreSQL releases its lock with its connection
    wait_for_backend_exit(postgres_url, backend)
    assert [r.run_id for r in store.orphaned_runs()] == ["far"]


def test_a_replica_whose_lock_connection_is_cut_writes_nothing_until_it_takes_a_new_lock(stores, postgres_url) -> None:
    store = stores()
    owner = store.owner()
    store.create_run(a_run("mine", owner))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (store.db.fence.pid,))
    wait_for_backend_exit(postgres_url, store.db.fence.pid)

    assert not store.owner_held()
    with pytest.raises(NotOwner, match="lost its lock"):
        store.update_run("mine", "late", "a write after the lock was lost")
    assert all(e["event"] != "late" for e in store.events("mine"))

    renewed = store.renew_owner()
    assert renewed.replica != owner.replica and store.owner_held()
    store.update_run("mine", "later", "a write under the new lock")
    assert [r.run_id for r in stores().orphaned_runs()] == ["mine"]  # its old owner is gone for everyone


def test_of_two_replicas_taking_one_orphan_over_one_wins(stores, postgres_url) -> None:
    one, two = stores(), stores()
    dead = Owner(ELSEWHERE_PID, 1, 99, "gone:1")
    one.create_run(a_run("orphan", dead))
    [seen_by_one], [seen_by_two] = one.orphaned_runs(), two.orphaned_runs()

    won = [
        one.claim_orphan(seen_by_one, "interrupted", "taken over", owner=one.owner()),
        two.claim_orphan(seen_by_two, "interrupted", "taken over", owner=two.owner()),
    ]
    assert won == [True, False]
    record = two.get_run("orphan")
    assert record is not None and record.owner == one.owner()
