"""The code-optimisation task's data and ground truth: synthetic employee records, the deliberately slow
reference `process_records` (train.py version 1), a fast trusted twin the harness checks against, and the
comparison rule. Half of its length is the reference program itself (`REFERENCE_SOURCE`, the text
train.py starts from), kept beside the twin it must agree with.

Comparison rule (`first_difference`, server/tasks/outputs.py): same structure; dicts equal as key sets,
lists element by element; str and bool exact; numbers (int or float, never bool) equal within 1e-9,
relative or absolute. The reference never rounds, and every summed quantity except the rating is an int, so an honest rewrite that
sums in another order lands within a few ulps of it, never across a rounding boundary.
"""

import math
import random
from collections import Counter, defaultdict
from operator import itemgetter
from typing import Any


def _words(text: str) -> tuple[str, ...]:
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


def make_records(n: int, seed: int) -> list[dict[str, Any]]:
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


def load_reference() -> Any:
    """The slow reference as a function, compiled from the very text the candidate starts from."""
    namespace: dict[str, Any] = {"__name__": "reference"}
    exec(compile(REFERENCE_SOURCE, "reference.py", "exec"), namespace)
    return namespace["process_records"]


def process_records_fast(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Same output as the reference, several times faster: the harness's oracle for correctness."""
    by_dept: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_dept[record["department"]].append(record)
    get_salary = itemgetter("salary")
    departments: dict[str, Any] = {}
    report = []
    for dept in sorted(by_dept):
        group = by_dept[dept]
        count = len(group)
        total = sum(map(get_salary, group))
        active = sum(1 for r in group if r["active"])
        top = sorted(group, key=lambda r: (-r["salary"], r["id"]))[:3]
        teams = Counter(r["city"] for r in group)
        departments[dept] = {
            "count": count,
            "active": active,
            "avg_salary": total / count,
            "max_salary": max(map(get_salary, group)),
            "avg_rating": math.fsum(r["rating"] for r in group) / count,
            "top_earners": [{"id": r["id"], "name": r["name"], "salary": r["salary"]} for r in top],
            "main_city": min(teams, key=lambda city: (-teams[city], city)),
        }
        report.append(f"{dept}: {count} staff, {active} active, average salary {total // count}")
    cities = Counter(r["city"] for r in records)
    skills = Counter(skill for r in records for skill in r["skills"])
    ages = Counter(f"{r['age'] // 10 * 10}s" for r in records)
    return {
        "total": len(records),
        "active": sum(1 for r in records if r["active"]),
        "high_performers": sum(1 for r in records if r["active"] and r["rating"] >= 4.5),
        "departments": departments,
        "department_ranking": sorted(departments, key=lambda d: (-departments[d]["avg_salary"], d)),
        "cities": {city: cities[city] for city in sorted(cities)},
        "top_skills": [
            [skill, n] for skill, n in sorted(skills.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        ],
        "age_bands": {band: ages[band] for band in sorted(ages)},
        "report": "\n".join(report),
    }


# The slow reference: the task's train.py version 1 and the baseline every speedup divides. Its
# anti-patterns are deliberate (copies, list membership, manual accumulation, bubble sorts, += on str).
# It is split into one function per stage, as a person would write it, so that a profile can say which
# stage is slow and a model can rewrite that stage alone.
REFERENCE_SOURCE = r'''def process_records(records):
    """Summarise employee records: per-department statistics, cities, skills, ages and a text report."""
    data = copy_records(records)
    stats = department_stats(data)
    people = count_people(data)
    summary, report = summarise_departments(stats)
    return {
        "total": len(data),
        "active": people["active"],
        "high_performers": people["high_performers"],
        "departments": summary,
        "department_ranking": rank_departments(summary),
        "cities": people["cities"],
        "top_skills": people["top_skills"],
        "age_bands": people["age_bands"],
        "report": report,
    }


def copy_records(records):
    """A copy of every record (its skills list too), so that the input is never modified."""
    data = []
    for record in records:
        copy = {}
        for key in record:
            copy[key] = record[key]
        copy["skills"] = list(record["skills"])
        data.append(copy)
    return data


def department_stats(data):
    """Per department: staff and active counts, salary total and maximum, rating total, the three best
    paid (highest salary first, ties by lower id) and the staff of each team (key "department|city")."""
    departments = []
    counts = {}
    active_counts = {}
    salary_totals = {}
    salary_max = {}
    rating_totals = {}
    top_earners = {}
    team_sizes = {}
    for record in data:
        dept = record["department"]
        if dept not in departments:
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
        # Keep the three best paid: add this one, bubble sort the short list, drop the last.
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
    return {
        "departments": departments,
        "counts": counts,
        "active_counts": active_counts,
        "salary_totals": salary_totals,
        "salary_max": salary_max,
        "rating_totals": rating_totals,
        "top_earners": top_earners,
        "team_sizes": team_sizes,
    }


def count_people(data):
    """Staff per city (sorted by name), the ten most common skills, staff per age band ("20s", ...),
    the active total, and the active staff rated 4.5 or more."""
    city_names = []
    city_counts = []
    skill_names = []
    skill_counts = []
    age_bands = {}
    active_total = 0
    high_performers = 0
    for record in data:
        if record["city"] not in city_names:
            city_names.append(record["city"])
            city_counts.append(0)
        city_counts[city_names.index(record["city"])] += 1
        for skill in record["skills"]:
            if skill not in skill_names:
                skill_names.append(skill)
                skill_counts.append(0)
            skill_counts[skill_names.index(skill)] += 1
        band = str(record["age"] // 10 * 10) + "s"
        if band in age_bands:
            age_bands[band] = age_bands[band] + 1
        else:
            age_bands[band] = 1
        if record["active"] == True:
            active_total = active_total + 1
            if record["rating"] >= 4.5:
                high_performers = high_performers + 1

    skills = []
    for i in range(len(skill_names)):
        skills.append([skill_names[i], skill_counts[i]])
    skills.sort(key=lambda pair: (-pair[1], pair[0]))
    cities = {}
    for name in sorted(city_names):
        cities[name] = city_counts[city_names.index(name)]
    bands = {}
    for band in sorted(age_bands):
        bands[band] = age_bands[band]
    return {
        "cities": cities,
        "top_skills": skills[:10],
        "age_bands": bands,
        "active": active_total,
        "high_performers": high_performers,
    }


def summarise_departments(stats):
    """Each department's summary, in name order, and the text report (one line per department)."""
    summary = {}
    report = ""
    for dept in sorted(stats["departments"]):
        count = stats["counts"][dept]
        main_city = None
        best = 0
        for key in sorted(stats["team_sizes"]):
            if key.split("|")[0] == dept and stats["team_sizes"][key] > best:
                main_city = key.split("|")[1]
                best = stats["team_sizes"][key]
        summary[dept] = {
            "count": count,
            "active": stats["active_counts"][dept],
            "avg_salary": stats["salary_totals"][dept] / count,
            "max_salary": stats["salary_max"][dept],
            "avg_rating": stats["rating_totals"][dept] / count,
            "top_earners": stats["top_earners"][dept],
            "main_city": main_city,
        }
        if report != "":
            report = report + "\n"
        report = report + dept + ": " + str(count) + " staff, " + str(stats["active_counts"][dept]) + " active"
        report = report + ", average salary " + str(stats["salary_totals"][dept] // count)
    return summary, report


def rank_departments(summary):
    """The department names by average salary, highest first, ties by name (a bubble sort)."""
    ranking = list(sorted(summary))
    for i in range(len(ranking)):
        for j in range(len(ranking) - 1 - i):
            if summary[ranking[j]]["avg_salary"] < summary[ranking[j + 1]]["avg_salary"]:
                ranking[j], ranking[j + 1] = ranking[j + 1], ranking[j]
    return ranking
'''
