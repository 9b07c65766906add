"""Regenerate `demo_pairs.jsonl`: the embedded demo set of `hf-distill quickstart`.

Original, synthetic content written for this project (Apache-2.0, like the package): every
sentence is assembled from the small hand-written phrase lists below, nothing is taken from
MRPC or any other dataset. Columns: sentence1, sentence2, label (1 = paraphrase, 0 = not).

A pair describes one event (who did what to what, where, when). Paraphrases (label 1) say
the same event with synonyms and another word order or the passive voice; non-paraphrases
(label 0) describe another event: half of them change a single fact (the actor, the object,
the action, the place, the time, or the polarity), the others two or more. The output is
deterministic (fixed seed).

Usage: python hf_distill/demo/make_demo_pairs.py [N_PAIRS]   (default 600)
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

# (canonical, synonyms...): each noun phrase is one referent.
ACTORS = [
    ("the doctor", "the physician"),
    ("the chef", "the cook"),
    ("a young boy", "a little boy"),
    ("an old woman", "an elderly woman"),
    ("the students", "the pupils"),
    ("the police officer", "the policeman"),
    ("my neighbour", "the man who lives next door"),
    ("the company", "the firm"),
    ("the singer", "the vocalist"),
    ("the farmer", "the grower"),
    ("the mayor", "the head of the town council"),
    ("two tourists", "a pair of visitors"),
    ("the engineer", "the technician"),
    ("her father", "her dad"),
    ("the teacher", "the instructor"),
    ("a group of workers", "a team of labourers"),
]

# Action domains: verbs as (base, past, participle) synonym sets, and the objects they fit.
DOMAINS = [
    {
        "verbs": [
            [("buy", "bought", "bought"), ("purchase", "purchased", "purchased")],
            [("sell", "sold", "sold")],
            [("repair", "repaired", "repaired"), ("fix", "fixed", "fixed")],
            [("wash", "washed", "washed"), ("clean", "cleaned", "cleaned")],
            [("paint", "painted", "painted")],
        ],
        "objects": [
            ("a new car", "a new automobile"),
            ("the old bicycle", "the old bike"),
            ("a small boat", "a little boat"),
            ("the red truck", "the red lorry"),
            ("a second-hand motorbike", "a used motorcycle"),
        ],
    },
    {
        "verbs": [
            [("start", "started", "started"), ("begin", "began", "begun")],
            [("finish", "finished", "finished"), ("complete", "completed", "completed")],
            [("cancel", "cancelled", "cancelled"), ("call off", "called off", "called off")],
            [("postpone", "postponed", "postponed"), ("put off", "put off", "put off")],
        ],
        "objects": [
            ("the meeting", "the session"),
            ("the building project", "the construction project"),
            ("the annual festival", "the yearly festival"),
            ("the football match", "the soccer game"),
            ("the training course", "the training programme"),
        ],
    },
    {
        "verbs": [
            [("write", "wrote", "written")],
            [("read", "read", "read")],
            [("publish", "published", "published"), ("release", "released", "released")],
            [("translate", "translated", "translated")],
        ],
        "objects": [
            ("a long letter", "a lengthy letter"),
            ("the report", "the study"),
            ("a short story", "a brief tale"),
            ("the weekly newsletter", "the newsletter of the week"),
            ("a book about birds", "a book on birds"),
        ],
    },
    {
        "verbs": [
            [("visit", "visited", "visited")],
            [("leave", "left", "left")],
            [("photograph", "photographed", "photographed")],
            [("close", "closed", "closed"), ("shut", "shut", "shut")],
        ],
        "objects": [
            ("the museum", "the gallery"),
            ("the old castle", "the ancient castle"),
            ("the harbour", "the port"),
            ("the city library", "the public library"),
            ("the village school", "the school in the village"),
        ],
    },
]

PLACES = [
    ("in the city centre", "downtown"),
    ("near the river", "close to the river"),
    ("in the north of the country", "in the country's north"),
    ("at the weekend market", "at the market on the weekend"),
    ("in a quiet suburb", "in a peaceful suburb"),
    ("on the coast", "by the sea"),
    ("", ""),  # no place
]

TIMES = [
    ("yesterday", "the day before"),
    ("last week", "a week ago"),
    ("on Monday morning", "early on Monday"),
    ("in March", "in the month of March"),
    ("two years ago", "a couple of years ago"),
    ("this afternoon", "earlier this afternoon"),
    ("late at night", "in the middle of the night"),
]


def pick(rng: random.Random, options: tuple[str, ...], paraphrase: bool) -> str:
    """The canonical wording, or (for the paraphrasing side) any of its synonyms."""
    return rng.choice(options[1:] or options) if paraphrase and rng.random() < 0.8 else options[0]


def realise(rng: random.Random, event: dict, reword: bool, negated: bool = False) -> str:
    """One sentence for `event`; `reword` swaps in synonyms and a different structure."""
    actor = pick(rng, ACTORS[event["actor"]], reword)
    verb = rng.choice(event["domain"]["verbs"][event["verb"]]) if reword else event["domain"]["verbs"][event["verb"]][0]
    obj = pick(rng, event["domain"]["objects"][event["object"]], reword)
    place = pick(rng, PLACES[event["place"]], reword)
    time = pick(rng, TIMES[event["time"]], reword)
    structure = rng.choice(["active", "fronted", "passive"]) if reword else "active"
    base, past, participle = verb
    if structure == "passive":
        core = f"{obj} was {'not ' if negated else ''}{participle} by {actor}"  # every object is singular
    else:
        core = f"{actor} {'did not ' + base if negated else past} {obj}"
    extras = [p for p in (place,) if p]
    if structure == "fronted":
        sentence = f"{time}, {core} {' '.join(extras)}".strip()
    else:
        sentence = " ".join([core, *extras, time])
    return sentence[0].upper() + sentence[1:] + "."


def random_event(rng: random.Random) -> dict:
    domain = rng.choice(DOMAINS)
    return {
        "domain": domain,
        "actor": rng.randrange(len(ACTORS)),
        "verb": rng.randrange(len(domain["verbs"])),
        "object": rng.randrange(len(domain["objects"])),
        "place": rng.randrange(len(PLACES)),
        "time": rng.randrange(len(TIMES)),
    }


def change_facts(rng: random.Random, event: dict) -> tuple[dict, bool]:
    """A different event: one fact changed (or the same event negated) half of the time, else several."""
    if rng.random() < 0.25:  # another event altogether
        return random_event(rng), False
    other = dict(event)
    slots = ["actor", "verb", "object", "place", "time"]
    if rng.random() < 0.5:
        slot = rng.choice([*slots, "negation"])
        if slot == "negation":
            return other, True
        chosen = [slot]
    else:
        chosen = rng.sample(slots, rng.randint(2, 3))
    sizes = {
        "actor": len(ACTORS),
        "verb": len(event["domain"]["verbs"]),
        "object": len(event["domain"]["objects"]),
        "place": len(PLACES),
        "time": len(TIMES),
    }
    for slot in chosen:
        other[slot] = rng.choice([i for i in range(sizes[slot]) if i != event[slot]])
    return other, False


def make_pairs(n: int, seed: int = 13) -> list[dict]:
    rng = random.Random(seed)
    rows, seen = [], set()
    while len(rows) < n:
        event = random_event(rng)
        label = len(rows) % 2  # balanced classes
        first = realise(rng, event, reword=False)
        if label == 1:
            second = realise(rng, event, reword=True)
        else:
            other, negated = change_facts(rng, event)
            second = realise(rng, other, reword=rng.random() < 0.7, negated=negated)
        if first == second or (first, second) in seen:
            continue
        seen.add((first, second))
        if rng.random() < 0.5:  # either side may be the reworded one
            first, second = second, first
        rows.append({"sentence1": first, "sentence2": second, "label": label})
    rng.shuffle(rows)
    return rows


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    path = Path(__file__).with_name("demo_pairs.jsonl")
    with path.open("w", encoding="utf-8") as handle:
        for row in make_pairs(n):
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {n} pairs to {path}")


if __name__ == "__main__":
    main()
