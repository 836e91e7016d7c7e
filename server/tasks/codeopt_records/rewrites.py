"""A catalogue of real rewrites of codeopt-records' `process_records`, for the scripted backend.

Applied cumulatively from the original train.py (`source_after(0)`), each step removes one of the
reference's anti-patterns and gives a correct, faster version; the last is the fastest pure-Python
version we know (about 6-7x on 10,000 records; see benchmarks/codeopt_limits.md). `WRONG_REWRITE`, a
plausible-looking edit of `source_after(2)` (up to step 5) that changes the output, is for tests of the
`incorrect` path.
"""

from functools import cache

from pydantic import BaseModel

from autoresearch_mcp.contract.edits import apply_edits
from autoresearch_mcp.contract.models import ScriptedPlan, ScriptedStep
from autoresearch_mcp.server.tasks.codeopt_records.records import REFERENCE_SOURCE


class Rewrite(BaseModel):
    description: str
    edits: list[tuple[str, str]]  # (search, replace); each search occurs exactly once where it applies


@cache
def source_after(step: int) -> str:
    """The source after the first `step` rewrites (0 = the original train.py)."""
    if not 0 <= step <= len(REWRITES):
        raise ValueError(f"step must be 0..{len(REWRITES)}, got {step}")
    if step == 0:
        return REFERENCE_SOURCE
    return apply_edits(source_after(step - 1), REWRITES[step - 1].edits)


_COPY = """    # Work on a copy so that the input is never modified.
    data = []
    for record in records:
        copy = {}
        for key in record:
            copy[key] = record[key]
        copy["skills"] = list(record["skills"])
        data.append(copy)
"""
_BUBBLE_TOP = """        # Keep the three best paid: add this one, bubble sort the short list, drop the last.
        top = top_earners[dept]
        top.append({"id": record["id"], "name": record["name"], "salary": record["salary"]})
        for i in range(len(top)):
            for j in range(len(top) - 1 - i):
                a = top[j]
                b = top[j + 1]
                if a["salary"] < b["salary"] or (a["salary"] == b["salary"] and a["id"] > b["id"]):
                    top[j] = b
                    top[j + 1] = a
        if len(top) > 3:
            top_earners[dept] = top[:3]
"""
_LIST_COUNTS = """        if record["city"] not in city_names:
            city_names.append(record["city"])
            city_counts.append(0)
        city_counts[city_names.index(record["city"])] += 1
        for skill in record["skills"]:
            if skill not in skill_names:
                skill_names.append(skill)
                skill_counts.append(0)
            skill_counts[skill_names.index(skill)] += 1
"""
_ACCUMULATE = """        counts[dept] = counts[dept] + 1
        if record["active"] == True:
            active_counts[dept] = active_counts[dept] + 1
        salary_totals[dept] = salary_totals[dept] + record["salary"]
        if record["salary"] > salary_max[dept]:
            salary_max[dept] = record["salary"]
        rating_totals[dept] = rating_totals[dept] + record["rating"]
        key = dept + "|" + record["city"]
        if key in team_sizes:
            team_sizes[key] = team_sizes[key] + 1
        else:
            team_sizes[key] = 1
"""
_SECOND_PASS_TAIL = """        band = str(record["age"] // 10 * 10) + "s"
        if band in age_bands:
            age_bands[band] = age_bands[band] + 1
        else:
            age_bands[band] = 1
        if record["active"] == True:
            active_total = active_total + 1
            if record["rating"] >= 4.5:
                high_performers = high_performers + 1
"""
_MAIN_CITY = """        main_city = None
        best = 0
        for key in sorted(team_sizes):
            if key.split("|")[0] == dept and team_sizes[key] > best:
                main_city = key.split("|")[1]
                best = team_sizes[key]
"""

# Steps 6 and 7 replace the whole function; their text is the function they produce.
_GROUPED = '''def process_records(records):
    """Summarise employee records: per-department statistics, cities, skills, ages and a text report."""
    groups = defaultdict(list)
    for record in records:
        groups[record["department"]].append(record)
    summary = {}
    report = []
    cities = Counter()
    for dept in sorted(groups):
        group = groups[dept]
        count = len(group)
        salaries = [r["salary"] for r in group]
        total = sum(salaries)
        active = sum(1 for r in group if r["active"])
        top = heapq.nsmallest(3, ((-r["salary"], r["id"], r["name"]) for r in group))
        teams = Counter(r["city"] for r in group)
        cities.update(teams)
        summary[dept] = {
            "count": count,
            "active": active,
            "avg_salary": total / count,
            "max_salary": max(salaries),
            "avg_rating": sum(r["rating"] for r in group) / count,
            "top_earners": [{"id": i, "name": name, "salary": -s} for s, i, name in top],
            "main_city": min(teams.items(), key=lambda item: (-item[1], item[0]))[0],
        }
        report.append(f"{dept}: {count} staff, {active} active, average salary {total // count}")
    skills = Counter(skill for r in records for skill in r["skills"])
    decades = Counter(r["age"] // 10 for r in records)
    return {
        "total": len(records),
        "active": sum(s["active"] for s in summary.values()),
        "high_performers": sum(1 for r in records if r["active"] and r["rating"] >= 4.5),
        "departments": summary,
        "department_ranking": sorted(summary, key=lambda d: (-summary[d]["avg_salary"], d)),
        "cities": {city: cities[city] for city in sorted(cities)},
        "top_skills": [[s, n] for s, n in sorted(skills.items(), key=lambda kv: (-kv[1], kv[0]))[:10]],
        "age_bands": {f"{d * 10}s": decades[d] for d in sorted(decades)},
        "report": "\\n".join(report),
    }
'''
_IN_C = '''def process_records(records):
    """Summarise employee records: per-department statistics, cities, skills, ages and a text report."""
    get_salary, get_active, get_rating = itemgetter("salary"), itemgetter("active"), itemgetter("rating")
    get_city = itemgetter("city")
    groups = defaultdict(list)
    for record in records:
        groups[record["department"]].append(record)
    summary = {}
    report = []
    cities = Counter()
    active_total = high_performers = 0
    for dept in sorted(groups):
        group = groups[dept]
        count = len(group)
        salaries = list(map(get_salary, group))
        actives = list(map(get_active, group))
        ratings = list(map(get_rating, group))
        total = sum(salaries)
        active = sum(actives)
        active_total += active
        high_performers += sum(map(mul, actives, map(partial(le, 4.5), ratings)))
        # Only records paid at least the third-highest salary can be in the top three (ties included).
        threshold = heapq.nlargest(3, salaries)[-1]
        contenders = compress(group, map(partial(le, threshold), salaries))
        top = sorted(contenders, key=lambda r: (-r["salary"], r["id"]))[:3]
        teams = Counter(map(get_city, group))
        cities.update(teams)
        summary[dept] = {
            "count": count,
            "active": active,
            "avg_salary": total / count,
            "max_salary": max(salaries),
            "avg_rating": sum(ratings) / count,
            "top_earners": [{"id": r["id"], "name": r["name"], "salary": r["salary"]} for r in top],
            "main_city": min(teams.items(), key=lambda item: (-item[1], item[0]))[0],
        }
        report.append(f"{dept}: {count} staff, {active} active, average salary {total // count}")
    # Records share few distinct skill lists and ages: count those, then expand.
    skills = Counter()
    for skill_set, n in Counter(map(tuple, map(itemgetter("skills"), records))).items():
        for skill in skill_set:
            skills[skill] += n
    decades = Counter()
    for age, n in Counter(map(itemgetter("age"), records)).items():
        decades[age // 10] += n
    return {
        "total": len(records),
        "active": active_total,
        "high_performers": high_performers,
        "departments": summary,
        "department_ranking": sorted(summary, key=lambda d: (-summary[d]["avg_salary"], d)),
        "cities": {city: cities[city] for city in sorted(cities)},
        "top_skills": [[s, n] for s, n in sorted(skills.items(), key=lambda kv: (-kv[1], kv[0]))[:10]],
        "age_bands": {f"{d * 10}s": decades[d] for d in sorted(decades)},
        "report": "\\n".join(report),
    }
'''


def _function_of(step: int) -> str:
    source = source_after(step)
    return source[source.index("def process_records(records):") :]


REWRITES: list[Rewrite] = [
    Rewrite(
        description="Read the records in place instead of copying every record first (nothing modifies them)",
        edits=[(_COPY, "    data = records\n")],
    ),
    Rewrite(
        description="Collect (-salary, id, name) per department and take heapq.nsmallest(3) once at the end, "
        "instead of bubble sorting the top list for every record",
        edits=[
            ("def process_records(records):", "import heapq\n\n\ndef process_records(records):"),
            (
                _BUBBLE_TOP,
                '        top_earners[dept].append((-record["salary"], record["id"], record["name"]))\n',
            ),
            (
                '            "top_earners": top_earners[dept],\n',
                '            "top_earners": [\n'
                '                {"id": i, "name": name, "salary": -s} for s, i, name in heapq.nsmallest(3, top_earners[dept])\n'
                "            ],\n",
            ),
        ],
    ),
    Rewrite(
        description="Count cities and skills in dicts instead of `x in list` scans and list.index lookups",
        edits=[
            (
                "    city_names = []\n    city_counts = []\n    skill_names = []\n    skill_counts = []\n",
                "    city_counts = {}\n    skill_counts = {}\n",
            ),
            (
                _LIST_COUNTS,
                '        city_counts[record["city"]] = city_counts.get(record["city"], 0) + 1\n'
                '        for skill in record["skills"]:\n'
                "            skill_counts[skill] = skill_counts.get(skill, 0) + 1\n",
            ),
            (
                "    for i in range(len(skill_names)):\n        skills.append([skill_names[i], skill_counts[i]])\n",
                "    for skill in skill_counts:\n        skills.append([skill, skill_counts[skill]])\n",
            ),
            (
                "    for name in sorted(city_names):\n        cities[name] = city_counts[city_names.index(name)]\n",
                "    for name in sorted(city_counts):\n        cities[name] = city_counts[name]\n",
            ),
        ],
    ),
    Rewrite(
        description="Accumulate with += on locals, tuple keys for (department, city) and integer age decades "
        "instead of building and splitting strings for every record",
        edits=[
            (
                _ACCUMULATE,
                '        salary = record["salary"]\n'
                "        counts[dept] += 1\n"
                '        if record["active"]:\n'
                "            active_counts[dept] += 1\n"
                "        salary_totals[dept] += salary\n"
                "        if salary > salary_max[dept]:\n"
                "            salary_max[dept] = salary\n"
                '        rating_totals[dept] += record["rating"]\n'
                '        key = (dept, record["city"])\n'
                "        team_sizes[key] = team_sizes.get(key, 0) + 1\n",
            ),
            (
                _SECOND_PASS_TAIL,
                '        decade = record["age"] // 10\n'
                "        age_bands[decade] = age_bands.get(decade, 0) + 1\n"
                '        if record["active"]:\n'
                "            active_total += 1\n"
                '            if record["rating"] >= 4.5:\n'
                "                high_performers += 1\n",
            ),
            (
                _MAIN_CITY,
                "        teams = [(-size, city) for (team_dept, city), size in team_sizes.items() if team_dept == dept]\n"
                "        main_city = min(teams)[1]\n",
            ),
            (
                "    for band in sorted(age_bands):\n        bands[band] = age_bands[band]\n",
                '    for decade in sorted(age_bands):\n        bands[f"{decade * 10}s"] = age_bands[decade]\n',
            ),
        ],
    ),
    Rewrite(
        description="Make one pass over the records instead of two, and derive the city totals and the "
        "active total from the per-department counts instead of counting them again",
        edits=[
            (
                "    departments = []\n",
                "    skill_counts = {}\n    age_bands = {}\n    high_performers = 0\n    departments = []\n",
            ),
            ("        if dept not in departments:\n", "        if dept not in counts:\n"),
            (
                '        top_earners[dept].append((-record["salary"], record["id"], record["name"]))\n\n'
                "    city_counts = {}\n    skill_counts = {}\n    age_bands = {}\n    active_total = 0\n"
                "    high_performers = 0\n    for record in data:\n"
                '        city_counts[record["city"]] = city_counts.get(record["city"], 0) + 1\n',
                '        top_earners[dept].append((-salary, record["id"], record["name"]))\n',
            ),
            (
                '        if record["active"]:\n            active_total += 1\n'
                '            if record["rating"] >= 4.5:\n                high_performers += 1\n',
                '        if record["active"] and record["rating"] >= 4.5:\n            high_performers += 1\n',
            ),
            (
                "    cities = {}\n",
                "    city_counts = {}\n    for (_, city), size in team_sizes.items():\n"
                "        city_counts[city] = city_counts.get(city, 0) + size\n    cities = {}\n",
            ),
            ('        "active": active_total,\n', '        "active": sum(active_counts.values()),\n'),
        ],
    ),
]
REWRITES += [
    Rewrite(
        description="Group the records by department first, then aggregate each group with built-ins "
        "(sum, max, Counter, heapq) instead of updating eight dicts per record",
        edits=[
            ("import heapq\n", "import heapq\nfrom collections import Counter, defaultdict\n"),
            (_function_of(len(REWRITES)), _GROUPED),
        ],
    ),
]
REWRITES += [
    Rewrite(
        description="Move the per-record work into C: itemgetter maps, compress for the top-three contenders, "
        "and Counters over distinct skill lists and ages",
        edits=[
            (
                "import heapq\nfrom collections import Counter, defaultdict\n",
                "import heapq\nfrom collections import Counter, defaultdict\nfrom functools import partial\n"
                "from itertools import compress\nfrom operator import itemgetter, le, mul\n",
            ),
            (_function_of(len(REWRITES)), _IN_C),
        ],
    ),
]

# Looks like a harmless simplification, but the top earners come out in ascending salary order.
WRONG_REWRITE = Rewrite(
    description="Take the top earners with sorted() instead of heapq",
    edits=[
        (
            "heapq.nsmallest(3, top_earners[dept])",
            "sorted(top_earners[dept], reverse=True)[:3]",
        )
    ],
)


# After the catalogue, a real model keeps trying small changes that rarely help. The scripted backend
# imitates that with semantically equivalent one-line alternatives of the final version: each variant
# flips one of these lines (a Gray code over them), so every variant is a new, correct source that
# differs from the previous one by exactly one search/replace edit.
VARIANT_TOGGLES: list[tuple[str, str]] = [
    ("salaries = list(map(get_salary, group))", 'salaries = [r["salary"] for r in group]'),
    ("actives = list(map(get_active, group))", 'actives = [r["active"] for r in group]'),
    ("ratings = list(map(get_rating, group))", 'ratings = [r["rating"] for r in group]'),
    ("teams = Counter(map(get_city, group))", 'teams = Counter(r["city"] for r in group)'),
    ("threshold = heapq.nlargest(3, salaries)[-1]", "threshold = sorted(salaries, reverse=True)[:3][-1]"),
    ('"max_salary": max(salaries),', '"max_salary": sorted(salaries)[-1],'),
]
VARIANTS = 2 ** len(VARIANT_TOGGLES) - 1


def _gray(k: int) -> int:
    return k ^ (k >> 1)


def variant_edit(k: int) -> tuple[str, str, str]:
    """(description, search, replace) turning variant k-1 (0 = the final rewrite) into variant k."""
    if not 1 <= k <= VARIANTS:
        raise ValueError(f"variant must be 1..{VARIANTS}, got {k}")
    bit = (_gray(k) ^ _gray(k - 1)).bit_length() - 1
    plain, alternative = VARIANT_TOGGLES[bit]
    on = bool(_gray(k) >> bit & 1)
    search, replace = (plain, alternative) if on else (alternative, plain)
    return f"Variant {k}: try `{replace.strip()}`", search, replace


@cache
def source_after_variant(k: int) -> str:
    """The final rewrite with variant k's lines flipped (0 = the final rewrite itself)."""
    source = source_after(len(REWRITES))
    for bit, (plain, alternative) in enumerate(VARIANT_TOGGLES):
        if _gray(k) >> bit & 1:
            source = apply_edits(source, [(plain, alternative)])
    return source


def plan() -> ScriptedPlan:
    """The catalogue as one chain of steps from the original: the rewrites, then the variants."""
    steps = [ScriptedStep(description=r.description, edits=r.edits) for r in REWRITES]
    for k in range(1, VARIANTS + 1):
        description, search, replace = variant_edit(k)
        steps.append(ScriptedStep(description=description, edits=[(search, replace)]))
    return ScriptedPlan(steps=steps)
