def process_records(records):
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
