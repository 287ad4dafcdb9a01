"""How a learner paces its takes from streaming rollout actors and cuts what it took into a batch
(``WorkerGroup.stream``): how many of the steps a batch lacks to wait for before the next take
(:func:`aim`), and which of the steps taken make the batch and which wait for the next (:func:`cut`).
"""

from __future__ import annotations

import math

from algorithms.sampling.fragment import Fragment

__all__ = ["APPROACH", "BATCH_SLACK", "aim", "cut"]

#: A batch may hold this share of steps beyond the steps asked for (a take never stops exactly
#: there); the steps beyond it wait for the next batch (:func:`cut`).
BATCH_SLACK = 0.05
#: While a batch lacks more than its slack, the learner waits for this share of what it lacks
#: before it takes, and for the rest with later takes (:func:`aim`).
APPROACH = 0.8


def aim(need: int, min_slots: int, actors: int) -> int:
    """How many of the ``need`` steps a batch still lacks to wait for before the next take:
    all of them once they are within the batch's slack (:data:`BATCH_SLACK`) or a step of
    each of the ``actors`` (a take is no finer: an off-policy trainer's rounds of a few
    steps take once), else :data:`APPROACH` of them.

    The wait is judged from a rate that a few slow steps put off by several percent, and a
    take that overshoots leaves its excess for the next batch, where it is stale: sampled
    with the weights before this batch's update, so one version behind the learner (and
    weighted, see ``PPO._correct_stale``), which costs return at equal env steps. Approached
    in a few takes (a round of calls of a few milliseconds each), a batch is filled with the
    steps sampled with the current weights, and only those sampled while the learner learns
    are behind."""
    if need <= max(min_slots * BATCH_SLACK, actors):
        return need
    return max(1, math.ceil(need * APPROACH))


def cut(carried: list[Fragment], fresh: list[Fragment], min_slots: int) -> tuple[list[Fragment], list[Fragment]]:
    """(the batch, what waits for the next): ``min_slots`` of the steps (or up to 5% more),
    oldest first: what was left over last time, then this batch's takes, each group's fragments
    cut in the same proportion. Without this, the first batch of a trial would hold everything
    its actors sampled while the learner set up (fewer updates per env step), and a late take
    would make a big batch."""
    kept: list[Fragment] = []
    carry: list[Fragment] = []
    budget = min_slots
    for group in (carried, fresh):
        size = sum(f.slots for f in group)
        if budget <= 0:
            carry.extend(group)
            continue
        if size <= budget * (1 + BATCH_SLACK):
            kept.extend(group)
            budget -= size
            continue
        share = budget / size
        for fragment in group:
            steps = fragment.num_steps
            head_steps = math.ceil(steps * share)
            if head_steps >= steps:
                kept.append(fragment)
            elif head_steps == 0:
                carry.append(fragment)
            else:
                head, tail = fragment.split(head_steps)
                kept.append(head)
                carry.append(tail)
        budget = 0
    return kept, carry
