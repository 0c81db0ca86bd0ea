"""The service's store of plans' further batches (service/planner.py `PlanStore`), as rules: a batch is answered
only for its plan's table and number, the oldest plans are forgotten first once more than `plans_kept` plans or
`kept_bytes` of text are held, and the newest plan is kept whatever its size (its client is still fetching it)."""

from __future__ import annotations

import pytest

from indexlib.service.planner import Answered, NoSuchPlanTask, PlanStore


def plan(plan_id: str, batches: int, size: int = 10, table: str = "db.t") -> Answered:
    return Answered(table, plan_id, "first", [f"{plan_id}:{n}".ljust(size, ".") for n in range(1, batches + 1)])


def held(store: PlanStore, *plans: Answered) -> set[str]:
    found = set()
    for answered in plans:
        try:
            store.batch(answered.table, f"{answered.plan_id}:1")
            found.add(answered.plan_id)
        except NoSuchPlanTask:
            pass
    return found


def test_a_batch_is_its_plans_own():
    store = PlanStore(plans_kept=4, kept_bytes=10_000)
    store.add(plan("a", 2))
    assert store.batch("db.t", "a:1").startswith("a:1") and store.batch("db.t", "a:2").startswith("a:2")
    for table, token, rule in [
        ("db.u", "a:1", "a token works only for its table"),
        ("db.t", "a:0", "batch 0 went out with the plan"),
        ("db.t", "a:3", "no batch past the plan's last"),
        ("db.t", "a:-1", "numbers are plain digits"),
        ("db.t", "a", "a token names its batch"),
        ("db.t", "b:1", "a plan never issued"),
    ]:
        with pytest.raises(NoSuchPlanTask):
            store.batch(table, token)
            pytest.fail(rule)


def test_a_plan_without_further_batches_is_not_kept():
    store = PlanStore(plans_kept=1, kept_bytes=10_000)
    store.add(plan("a", 1))
    store.add(plan("b", 0))
    assert held(store, plan("a", 1)) == {"a"}, "a plan of one batch does not push out one still being fetched"


@pytest.mark.parametrize(
    ("plans_kept", "kept_bytes", "sizes", "expected", "rule"),
    [
        (2, 10_000, [10, 10, 10], {"b", "c"}, "at most plans_kept plans: the oldest forgotten first"),
        (5, 25, [10, 10, 10], {"b", "c"}, "at most kept_bytes of text: the oldest forgotten first"),
        (5, 25, [10, 10, 100], {"c"}, "the newest plan is kept whatever its size"),
        (5, 1_000, [10, 10, 10], {"a", "b", "c"}, "within both bounds every plan is kept"),
    ],
)
def test_the_oldest_plans_are_forgotten_first(plans_kept, kept_bytes, sizes, expected, rule):
    store = PlanStore(plans_kept=plans_kept, kept_bytes=kept_bytes)
    plans = [plan(plan_id, 1, size) for plan_id, size in zip("abc", sizes, strict=True)]
    for answered in plans:
        store.add(answered)
    assert held(store, *plans) == expected, rule
