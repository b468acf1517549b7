"""bench/flow_targets.py: the derived figures and the targets of ``bench flow`` (issue 29 §5)."""

from __future__ import annotations

from bench import flow_targets


def test_the_mean_in_flight_after_settling_leaves_out_the_first_seconds_and_the_partial_last():
    assert flow_targets.mean_after([1.0, 2.0, 30.0, 32.0, 5.0], 2) == 31.0
    assert flow_targets.mean_after([1.0, 2.0, 3.0], 2) is None, "no whole second after settling"


def test_the_mean_in_flight_leaves_out_the_seconds_with_fewer_items_left_than_the_capacity():
    busy = [10.0, 30.0, 30.0, 28.0, 4.0, 0.5, 0.2]
    ok = [100, 600, 600, 560, 90, 2, 1]  # 1,953 items: 93 left after second 3, 3 after second 4
    assert flow_targets.mean_after(busy, 1, backlog=(ok, 1953, 32)) == 29.33, "seconds 1-3: 3 left after the 4th"
    assert flow_targets.mean_after(busy, 1, backlog=(ok, 1953, 100)) == 30.0, "seconds 1-2: 93 left after the 3rd"
    assert flow_targets.mean_after(busy, 1) == 18.5, "to the end, the partial last second left out"
    assert flow_targets.mean_after(busy, 1, backlog=(ok, 1953, 2000)) is None, "never enough items left"


def test_a_cooldown_counts_from_when_the_watch_saw_it_plus_the_grace_until_it_ends():
    # Seen at 10.0 cooling until 11.0, seen again at 10.1 (the same cooldown), then one at 20.
    samples = [(9.9, None), (10.0, 11.0), (10.1, 11.0), (11.1, None), (20.0, 21.5), (21.6, 21.5)]
    spans = flow_targets.cooldowns(samples, grace=0.1)
    assert spans == [(10.1, 11.0), (20.1, 21.5)]
    arrivals = [10.05, 10.1, 10.5, 10.99, 11.0, 15.0, 20.2, 21.49, 21.5]
    assert flow_targets.calls_within(arrivals, spans) == 5, "10.1, 10.5, 10.99, 20.2, 21.49"


def test_a_cooldown_that_ends_within_the_grace_covers_nothing():
    assert flow_targets.cooldowns([(10.0, 10.05)], grace=0.1) == []


def test_samples_by_second_keep_the_last_value_of_each_second_and_carry_it_over_gaps():
    samples = [(100.2, 1), (100.9, 2), (102.5, 5), (99.0, 7)]
    assert flow_targets.by_second(samples, origin=100.0) == [2, 2, 5]
    assert flow_targets.transitions([(100.0, "closed"), (100.1, "closed"), (101.0, "open"), (131.0, "half_open"),
                                     (131.1, "closed")], origin=100.0) == [
        (0.0, "closed"), (1.0, "open"), (31.0, "half_open"), (31.1, "closed")]


def base(**figures):
    return {"items": 100, "succeeded": 100, "merge": "SUCCEEDED", "limit": 64, "calls": 1000, "throttled": 50,
            "max_in_flight": 64, "attempts_max": 1, "achieved_per_s": 170.0, **figures}


def test_the_rate_targets_hold_at_their_lines_and_fail_just_past_them():
    met = flow_targets.evaluate("rate", base(rate=200, throttled=100, calls_during_cooldown=0))
    assert {name: target["ok"] for name, target in met.items()} == {
        "every_child_succeeded": True, "max_in_flight": True, "attempts_max": True, "achieved_per_s": True,
        "throttled_share": True, "calls_during_cooldown": True}
    missed = flow_targets.evaluate("rate", base(rate=200, throttled=101, achieved_per_s=169.9, attempts_max=2,
                                                max_in_flight=65, succeeded=99, merge="FAILED",
                                                calls_during_cooldown=1))
    assert not any(target["ok"] for target in missed.values())
    assert missed["throttled_share"]["value"] == 0.101


def test_a_cooldown_that_could_not_be_watched_is_no_target():
    targets = flow_targets.evaluate("rate", base(rate=200, calls_during_cooldown=None))
    assert "calls_during_cooldown" not in targets


def test_the_capacity_targets_need_a_mean_between_0_8_c_and_c_and_few_503s():
    def ok(mean, throttled=30):
        targets = flow_targets.evaluate("capacity", base(capacity=32, throttled=throttled,
                                                         mean_in_flight_after_settle=mean))
        return targets["mean_in_flight_after_settle"]["ok"], targets["throttled_share"]["ok"]

    assert ok(25.6) == (True, True) and ok(32) == (True, True)
    assert ok(25.5)[0] is False and ok(32.1)[0] is False and ok(None)[0] is False
    assert ok(30, throttled=31)[1] is False


def test_the_outage_targets_compare_with_the_fixed_limit_and_need_the_outage_mid_run():
    def targets(during, after=10, reference=1000):
        return flow_targets.evaluate("outage", base(calls_during_outage=during, calls_after_outage=after,
                                                    reference_calls_during_outage=reference))

    assert targets(50)["calls_during_outage"]["ok"] is True
    assert targets(51)["calls_during_outage"]["ok"] is False
    assert targets(50, after=0)["outage_mid_run"]["ok"] is False, "the run ended before the outage did"
    assert targets(0)["outage_mid_run"]["ok"] is False, "the outage never began"
