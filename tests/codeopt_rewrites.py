"""A catalogue of real rewrites of codeopt-records' train.py: what the scripted backend plays (the
shipped folder's scripted.json is `plan()`, written out; a test keeps the two the same).

Applied cumulatively from the original train.py (`source_after(0)`), each step removes one of the
reference's anti-patterns from one of its functions and gives a correct, faster version; the last is
about as fast as pure Python gets here (see benchmarks/codeopt_limits.md). A step is search/replace
edits or a whole new definition of one function (`function`, which the double sends with
replace_function), and it changes the function the profile shows as the hottest at that point (the
order was read off profiles of each step). `WRONG_REWRITE`, a plausible-looking edit of
`source_after(2)` (up to step 5) that changes the output, is for tests of the `incorrect` path.
Most of its length is program text: the catalogue is data, read in one place.
"""

import shutil
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from autoresearch_mcp.contract.edits import apply_edits
from autoresearch_mcp.contract.functions import functions_in, replace_function
from autoresearch_mcp.contract.models import ScriptedPlan, ScriptedStep
from autoresearch_mcp.server.tasks.registry import BUILTIN

FOLDER = BUILTIN / "codeopt-records"
REFERENCE_SOURCE = (FOLDER / "train.py").read_text()


class Rewrite(BaseModel):
    description: str
    edits: list[tuple[str, str]] = Field(default_factory=list)  # each search occurs once where it applies
    function: str | None = None  # or one whole new def (import lines before it go to the top)


def function_name(definition: str) -> str:
    return definition.split("\ndef ", 1)[-1].removeprefix("def ").split("(", 1)[0]


def apply_rewrite(source: str, rewrite: Rewrite) -> str:
    if rewrite.function is not None:
        return replace_function(source, function_name(rewrite.function), rewrite.function)
    return apply_edits(source, rewrite.edits)


@cache
def source_after(step: int) -> str:
    """The source after the first `step` rewrites (0 = the original train.py)."""
    if not 0 <= step <= len(REWRITES):
        raise ValueError(f"step must be 0..{len(REWRITES)}, got {step}")
    if step == 0:
        return REFERENCE_SOURCE
    return apply_rewrite(source_after(step - 1), REWRITES[step - 1])


def changed_functions(before: str, after: str) -> list[str]:
    """The top-level functions whose text differs between two versions (new ones included)."""
    old = {f.name: f.source for f in functions_in(before)}
    return [f.name for f in functions_in(after) if old.get(f.name) != f.source]


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
_ACCUMULATE = """        if dept not in departments:
            departments.append(dept)
            counts[dept] = 0
            active_counts[dept] = 0
            salary_totals[dept] = 0
            salary_max[dept] = record["salary"]
            rating_totals[dept] = 0.0
            top_earners[dept] = []
        counts[dept] = counts[dept] + 1
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
        top_earners[dept].append((-record["salary"], record["id"], record["name"]))
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
_STATS_DOC = '''    """Per department: staff and active counts, salary total and maximum, rating total, the three best
    paid (highest salary first, ties by lower id) and the staff of each team (key "department|city")."""
'''
_STATS_RETURN = """    return {
        "departments": departments,
        "counts": counts,
        "active_counts": active_counts,
        "salary_totals": salary_totals,
        "salary_max": salary_max,
        "rating_totals": rating_totals,
        "top_earners": top_earners,
        "team_sizes": team_sizes,
    }
"""
_PEOPLE_DOC = '''    """Staff per city (sorted by name), the ten most common skills, staff per age band ("20s", ...),
    the active total, and the active staff rated 4.5 or more."""
'''
_NO_COPY = '''def copy_records(records):
    """The records as they are: nothing here modifies them, so no copy is needed."""
    return records
'''
# Group the records by department, then aggregate each group with built-ins.
_GROUPED = (
    "import heapq\nfrom collections import Counter, defaultdict\n\n\ndef department_stats(data):\n"
    + _STATS_DOC
    + """    groups = defaultdict(list)
    for record in data:
        groups[record["department"]].append(record)
    departments = list(groups)
    counts, active_counts, salary_totals, salary_max = {}, {}, {}, {}
    rating_totals, top_earners, team_sizes = {}, {}, {}
    for dept, group in groups.items():
        salaries = [r["salary"] for r in group]
        counts[dept] = len(group)
        active_counts[dept] = sum(1 for r in group if r["active"])
        salary_totals[dept] = sum(salaries)
        salary_max[dept] = max(salaries)
        rating_totals[dept] = sum(r["rating"] for r in group)
        top = heapq.nsmallest(3, ((-r["salary"], r["id"], r["name"]) for r in group))
        top_earners[dept] = [{"id": i, "name": name, "salary": -s} for s, i, name in top]
        for city, size in Counter(r["city"] for r in group).items():
            team_sizes[dept + "|" + city] = size
"""
    + _STATS_RETURN
)
# Count in C: Counters over the records' fields, and over the few distinct skill lists and ages.
_PEOPLE_IN_C = (
    "from collections import Counter\nfrom itertools import compress\nfrom operator import itemgetter\n\n\n"
    "def count_people(data):\n"
    + _PEOPLE_DOC
    + """    cities = Counter(map(itemgetter("city"), data))
    skills = Counter()
    for skill_set, n in Counter(map(tuple, map(itemgetter("skills"), data))).items():
        for skill in skill_set:
            skills[skill] += n
    decades = Counter()
    for age, n in Counter(map(itemgetter("age"), data)).items():
        decades[age // 10] += n
    ratings = list(compress(map(itemgetter("rating"), data), map(itemgetter("active"), data)))
    return {
        "cities": {city: cities[city] for city in sorted(cities)},
        "top_skills": [[s, n] for s, n in sorted(skills.items(), key=lambda kv: (-kv[1], kv[0]))[:10]],
        "age_bands": {f"{d * 10}s": decades[d] for d in sorted(decades)},
        "active": len(ratings),
        "high_performers": sum(1 for rating in ratings if rating >= 4.5),
    }
"""
)
# The per-record work of the departments in C too: itemgetter maps, and compress for the top three.
_STATS_IN_C = (
    "import heapq\nfrom collections import Counter, defaultdict\nfrom functools import partial\n"
    "from itertools import compress\nfrom operator import itemgetter, le\n\n\ndef department_stats(data):\n"
    + _STATS_DOC
    + """    get_salary, get_active, get_rating = itemgetter("salary"), itemgetter("active"), itemgetter("rating")
    get_city = itemgetter("city")
    groups = defaultdict(list)
    for record in data:
        groups[record["department"]].append(record)
    departments = list(groups)
    counts, active_counts, salary_totals, salary_max = {}, {}, {}, {}
    rating_totals, top_earners, team_sizes = {}, {}, {}
    for dept, group in groups.items():
        salaries = list(map(get_salary, group))
        counts[dept] = len(group)
        active_counts[dept] = sum(map(get_active, group))
        salary_totals[dept] = sum(salaries)
        salary_max[dept] = max(salaries)
        rating_totals[dept] = sum(map(get_rating, group))
        # Only records paid at least the third-highest salary can be in the top three (ties included).
        threshold = heapq.nlargest(3, salaries)[-1]
        contenders = compress(group, map(partial(le, threshold), salaries))
        top = sorted(contenders, key=lambda r: (-r["salary"], r["id"]))[:3]
        top_earners[dept] = [{"id": r["id"], "name": r["name"], "salary": r["salary"]} for r in top]
        for city, size in Counter(map(get_city, group)).items():
            team_sizes[dept + "|" + city] = size
"""
    + _STATS_RETURN
)

REWRITES: list[Rewrite] = [
    Rewrite(
        description="department_stats: collect (-salary, id, name) per department and take "
        "heapq.nsmallest(3) once at the end, instead of bubble sorting the top list for every record",
        edits=[
            ("def process_records(records):", "import heapq\n\n\ndef process_records(records):"),
            (
                _BUBBLE_TOP,
                '        top_earners[dept].append((-record["salary"], record["id"], record["name"]))\n',
            ),
            (
                '    return {\n        "departments": departments,\n',
                "    for dept in top_earners:\n"
                "        top_earners[dept] = [\n"
                '            {"id": i, "name": name, "salary": -s} for s, i, name in heapq.nsmallest(3, top_earners[dept])\n'
                "        ]\n"
                '    return {\n        "departments": departments,\n',
            ),
        ],
    ),
    Rewrite(
        description="count_people: count cities and skills in dicts instead of `x in list` scans and "
        "list.index lookups",
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
        description="copy_records: return the records themselves; nothing modifies them, so copying "
        "every record and its skills list is wasted work",
        function=_NO_COPY,
    ),
    Rewrite(
        description="department_stats: accumulate with += on locals and dict lookups instead of a list "
        "scan for the department and repeated reads of every total",
        edits=[
            (
                _ACCUMULATE,
                '        salary = record["salary"]\n'
                "        if dept not in counts:\n"
                "            departments.append(dept)\n"
                "            counts[dept] = active_counts[dept] = salary_totals[dept] = 0\n"
                "            salary_max[dept] = salary\n"
                "            rating_totals[dept] = 0.0\n"
                "            top_earners[dept] = []\n"
                "        counts[dept] += 1\n"
                '        if record["active"]:\n'
                "            active_counts[dept] += 1\n"
                "        salary_totals[dept] += salary\n"
                "        if salary > salary_max[dept]:\n"
                "            salary_max[dept] = salary\n"
                '        rating_totals[dept] += record["rating"]\n'
                '        key = dept + "|" + record["city"]\n'
                "        team_sizes[key] = team_sizes.get(key, 0) + 1\n"
                '        top_earners[dept].append((-salary, record["id"], record["name"]))\n',
            ),
        ],
    ),
    Rewrite(
        description="count_people: integer age decades and += instead of building a band string and "
        "looking it up twice for every record",
        edits=[
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
                "    for band in sorted(age_bands):\n        bands[band] = age_bands[band]\n",
                '    for decade in sorted(age_bands):\n        bands[f"{decade * 10}s"] = age_bands[decade]\n',
            ),
        ],
    ),
    Rewrite(
        description="department_stats: group the records by department first, then aggregate each group "
        "with built-ins (sum, max, Counter, heapq) instead of updating eight dicts per record",
        function=_GROUPED,
    ),
    Rewrite(
        description="count_people: count with Counters in C, over the few distinct skill lists and ages "
        "instead of every record",
        function=_PEOPLE_IN_C,
    ),
    Rewrite(
        description="department_stats: move the per-record work into C: itemgetter maps, and compress "
        "for the top-three contenders",
        function=_STATS_IN_C,
    ),
]

# Looks like a harmless simplification, but the top earners come out in ascending salary order.
WRONG_REWRITE = Rewrite(
    description="Take the top earners with sorted() instead of heapq",
    edits=[("heapq.nsmallest(3, top_earners[dept])", "sorted(top_earners[dept], reverse=True)[:3]")],
)


# After the catalogue, a real model keeps trying small changes that rarely help. The scripted backend
# imitates that with semantically equivalent one-line alternatives of the final version: each variant
# flips one of these lines of department_stats (a Gray code over them), so every variant is a new,
# correct source that differs from the previous one by exactly one search/replace edit.
VARIANT_TOGGLES: list[tuple[str, str]] = [
    ("salaries = list(map(get_salary, group))", 'salaries = [r["salary"] for r in group]'),
    (
        "active_counts[dept] = sum(map(get_active, group))",
        'active_counts[dept] = sum(1 for r in group if r["active"])',
    ),
    (
        "rating_totals[dept] = sum(map(get_rating, group))",
        'rating_totals[dept] = sum(r["rating"] for r in group)',
    ),
    ("Counter(map(get_city, group)).items()", 'Counter(r["city"] for r in group).items()'),
    ("threshold = heapq.nlargest(3, salaries)[-1]", "threshold = sorted(salaries, reverse=True)[:3][-1]"),
    ("salary_max[dept] = max(salaries)", "salary_max[dept] = sorted(salaries)[-1]"),
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
    steps = [ScriptedStep(description=r.description, edits=r.edits, function=r.function) for r in REWRITES]
    for k in range(1, VARIANTS + 1):
        description, search, replace = variant_edit(k)
        steps.append(ScriptedStep(description=description, edits=[(search, replace)]))
    return ScriptedPlan(steps=steps)


def records_module():
    """The shipped folder's records.py (its make_records makes the benchmark's inputs)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("codeopt_records_inputs", FOLDER / "records.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_records(n: int, seed: int) -> list:
    return records_module().make_records(n, seed)


def load_reference():
    """The slow reference as a function, compiled from the very text the candidate starts from."""
    namespace: dict = {"__name__": "reference"}
    exec(compile(REFERENCE_SOURCE, "reference.py", "exec"), namespace)
    return namespace["process_records"]


def codeopt_folder(
    where: Path, records: int = 1500, calls: int = 3, name: str = "codeopt-records", **task: Any
) -> Path:
    """A copy of the shipped codeopt-records folder at `where`, its inputs `records` long and `calls`
    timed calls (a test's size), under `name`, with `task` keys set in its [task] table. Given as a
    task folder (task_dirs), a copy named codeopt-records runs in the shipped one's place."""
    shutil.copytree(FOLDER, where, ignore=shutil.ignore_patterns("__pycache__"))
    toml = (where / "autoresearch.toml").read_text()
    toml = toml.replace('name = "codeopt-records"', f'name = "{name}"').replace(
        "calls = 20", f"calls = {calls}"
    )
    extra = "".join(
        f"{key} = {str(value).lower() if isinstance(value, bool) else value}\n" for key, value in task.items()
    )
    toml = toml.replace('work = "code"\n', f'work = "code"\n{extra}')
    (where / "autoresearch.toml").write_text(toml)
    inputs = (where / "records.py").read_text().replace("RECORDS = 10_000", f"RECORDS = {records}")
    (where / "records.py").write_text(inputs)
    return where
