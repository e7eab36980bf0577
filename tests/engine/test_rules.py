"""Property tests for the rules that must hold for all inputs: menu dropout, beam
selection, store round-trips, code extraction."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocomp.beam import improves, select_beam
from autocomp.extract import extract_code
from autocomp.menu import rng_for, sample_menu
from autocomp.model import Candidate, Evaluation, Metric, Verdict, code_hash
from autocomp.store import Store, StoreError

OPTIONS = [f"option {i}" for i in range(40)]


def test_dropout_keeps_each_option_with_probability_keep():
    rng = random.Random(1)
    counts = {o: 0 for o in OPTIONS}
    trials = 4000
    for _ in range(trials):
        for o in sample_menu(OPTIONS, 0.3, rng):
            counts[o] += 1
    for o, c in counts.items():
        assert abs(c / trials - 0.3) < 0.04, (o, c / trials)


@given(keep=st.floats(0, 1), seed=st.integers(0, 10**6), n=st.integers(1, 30))
def test_dropout_never_empty_and_in_menu_order(keep, seed, n):
    options = OPTIONS[:n]
    chosen = sample_menu(options, keep, random.Random(seed))
    assert chosen and all(o in options for o in chosen)
    assert chosen == [o for o in options if o in chosen]


def test_dropout_is_positional_not_order_dependent():
    a = sample_menu(OPTIONS, 0.3, rng_for(5, 2, "start", 1))
    b = sample_menu(OPTIONS, 0.3, rng_for(5, 2, "start", 1))
    c = sample_menu(OPTIONS, 0.3, rng_for(5, 2, "start", 2))
    assert a == b and a != c


def cand(cid, cost, verdict=Verdict.CORRECT, parent="p", code=None):
    c = Candidate(id=cid, code=code if code is not None else f"code {cid}", parent=parent)
    c.evaluation = Evaluation(verdict, {"cost": Metric(cost, "u", "test")})
    return c


children_strategy = st.lists(
    st.tuples(st.integers(1, 2000), st.sampled_from(list(Verdict)), st.integers(0, 5)),
    max_size=12,
)


@given(children=children_strategy, width=st.integers(1, 5), parent_cost=st.integers(1, 2000), min_imp=st.sampled_from([0.0, 0.05]))
@settings(max_examples=200)
def test_beam_selection_rules(children, width, parent_cost, min_imp):
    parent = cand("p", parent_cost, parent=None)
    kids = [cand(f"k{i}", cost, verdict, code=f"code {dup}") for i, (cost, verdict, dup) in enumerate(children)]
    beam = select_beam([parent], kids, {"p": parent}, width, "cost", True, min_imp)
    assert 1 <= len(beam) <= width
    for member in beam:
        if member.id != "p":
            assert member.verdict is Verdict.CORRECT
            assert member.metrics["cost"].value < parent_cost * (1 - min_imp)
    assert len({code_hash(m.code) for m in beam}) == len(beam)
    costs = [m.metrics["cost"].value for m in beam]
    assert costs == sorted(costs)
    best_possible = min([parent_cost] + [c.metrics["cost"].value for c in kids if improves(c, parent, "cost", True, min_imp)])
    assert costs[0] == best_possible


def test_store_round_trip_and_refuses_pickle(tmp_path):
    store = Store.open(tmp_path / "h")
    c = cand("x", 3)
    store.set("k", c.to_json())
    assert Candidate.from_json(store.get("k")).to_json() == c.to_json()
    with pytest.raises(TypeError):
        store.set("bad", object())
    # an entry written with pickle by someone else is refused, not loaded
    import diskcache

    raw = diskcache.Cache(str(tmp_path / "h" / "store"))
    raw.set("evil", {1, 2})  # a set can only be pickled
    raw.close()
    with pytest.raises(StoreError):
        store.get("evil")
    assert oct((tmp_path / "h").stat().st_mode & 0o777) == "0o700"


@given(st.text(max_size=300))
def test_extraction_never_raises(text):
    result = extract_code(text, "c", "k")
    assert (result.code is None) == bool(result.problem)


def test_extraction_prefers_tagged_full_kernel():
    reply = "Change:\n```c\nx += 1;\n```\nFull:\n```c\nvoid k(int *x) {\n  x[0] += 1;\n}\n```\n```text\nnotes\n```"
    assert extract_code(reply, "c", "k").code == "void k(int *x) {\n  x[0] += 1;\n}\n"
