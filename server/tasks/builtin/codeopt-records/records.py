"""The benchmark's inputs, which the agent may not edit (it is not in `edit`): synthetic employee
records. The harness calls make_input(seed) for each timed call, with a seed it draws fresh and no
version of train.py sees before its call ([benchmark] in autoresearch.toml)."""

import random

RECORDS = 10_000


def _words(text):
    return tuple(text.split())


FIRST_NAMES = _words(
    "Ada Alan Alice Amir Ana Arjun Bea Ben Carla Chen Dana David Elena Eli Emma Farah Finn Grace Hana Ivan "
    "Jack Jia Jonas Kai Kofi Lara Leo Lina Luca Maya Mei Mila Nia Noah Omar Paula Priya Quinn Rafael Rosa "
    "Sam Sara Taro Tess Uma Victor Wen Xavier Yara Zoe"
)
LAST_NAMES = _words(
    "Abe Baker Costa Diaz Evans Fischer Garcia Hansen Ito Jensen Khan Larsen Lopez Meyer Nakamura Novak "
    "Olsen Patel Quist Rossi Sato Schmidt Silva Smith Tanaka Torres Umar Vargas Wagner Weber Wong Xu Yilmaz "
    "Young Zhang Berg Cruz Dubois Engel Ford Gomez Horvat Ivanova Kim Lindqvist Moreau Nowak Okafor "
    "Perez Reyes"
)
DEPARTMENTS = ("Engineering", "Sales", "Marketing", "Finance", "Operations", "Support", "HR", "Legal")
_DEPT_WEIGHTS = (30, 18, 10, 9, 12, 14, 4, 3)
_DEPT_BASE_SALARY = (95_000, 60_000, 58_000, 72_000, 55_000, 42_000, 52_000, 88_000)
CITIES = _words("Amsterdam Berlin Chicago Dublin Lisbon London Madrid Nairobi Paris Seoul Singapore Toronto")
SKILLS = _words(
    "python sql excel negotiation design rust go java kubernetes statistics writing sales-ops budgeting "
    "recruiting support-tools legal-research ml security cloud presentation"
)
# A fixed pool of skill sets, so that generating a record costs one choice instead of a sample.
_rng0 = random.Random(0)
_SKILL_SETS = tuple(tuple(_rng0.sample(SKILLS, _rng0.randint(1, 5))) for _ in range(512))
del _rng0


def make_records(n, seed):
    """`n` synthetic employee records (plain JSON types), the same for the same seed in any process."""
    rng = random.Random(seed)
    rand = rng.random
    firsts = rng.choices(FIRST_NAMES, k=n)
    lasts = rng.choices(LAST_NAMES, k=n)
    depts = rng.choices(range(len(DEPARTMENTS)), weights=_DEPT_WEIGHTS, k=n)
    cities = rng.choices(CITIES, k=n)
    skill_sets = rng.choices(_SKILL_SETS, k=n)
    records = []
    for i in range(n):
        years = int(rand() * rand() * 36)  # skewed towards juniors
        dept = depts[i]
        records.append(
            {
                "id": i + 1,
                "name": f"{firsts[i]} {lasts[i]}",
                "department": DEPARTMENTS[dept],
                "city": cities[i],
                "salary": _DEPT_BASE_SALARY[dept] + years * 1_800 + int(rand() * 40_000),
                "years": years,
                "age": 21 + years + int(rand() * 12),
                "active": rand() < 0.86,
                "rating": int(10 + rand() * 41) / 10,  # 1.0 .. 5.0 in steps of 0.1
                "skills": list(skill_sets[i]),
            }
        )
    return records


def make_input(seed):
    """The argument of one call: RECORDS records made from `seed`."""
    return make_records(RECORDS, seed)
