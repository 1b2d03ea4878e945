"""Writes people.jsonl: 30 flat extraction tasks (a person: name, age, city, occupation) with
their gold answers, in the DeepJSONEval row shape (id, language, depth, schema, text,
expected), for the convergence benchmark's `TASKS=people`. Deterministic: rerunning writes
the same file. The schema is examples/person/schema.json (occupation from a closed list, an
age of 16-100), so a model must map "teaches" to "teacher" and "fixes wiring" to "electrician".
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA = json.loads((HERE.parent.parent / "examples" / "person" / "schema.json").read_text())

NAMES = ["Yuki Tanaka", "Carlos Mendez", "Amara Okafor", "Lena Berg", "Tom Reyes", "Priya Nair", "Jonas Weber",
         "Fatima Zahra", "Mateo Rossi", "Ingrid Holm", "Kwame Mensah", "Sofia Alves", "Hiro Sato", "Nadia Petrova",
         "Omar Haddad"]
CITIES = ["Osaka", "Monterrey", "Lagos", "Uppsala", "Austin", "Kochi", "Leipzig", "Rabat", "Turin", "Bergen",
          "Accra", "Porto", "Sapporo", "Kazan", "Beirut"]
# (occupation in the list, how the text says it)
JOBS = [("nurse", "a nurse"), ("electrician", "an electrician"), ("pilot", "a pilot"), ("teacher", "a teacher"),
        ("other", "a baker"), ("other", "an accountant")]
TEMPLATES = [
    "{name}, {age}, works as {job} in {city}.",
    "{name} is {job} from {city}; {they} turned {age} this spring.",
    "Meet {name}: {job} based in {city}, {age} years old.",
    "In {city}, {name} ({age}) has been {job} for years.",
    "{name}, a {age}-year-old {bare}, lives in {city}.",
]


def main():
    rng = random.Random(7)
    rows = []
    for i in range(30):
        name, city = NAMES[i % len(NAMES)], CITIES[(i * 7) % len(CITIES)]
        occupation, job = JOBS[i % len(JOBS)]
        age = rng.randint(19, 68)
        text = TEMPLATES[i % len(TEMPLATES)].format(name=name, age=age, job=job, city=city, they="they",
                                                    bare=job.split(" ", 1)[1])
        rows.append({"id": f"people-{i:04d}", "source": "bench/tasks/make_people.py", "category": "person",
                     "depth": 1, "language": "en", "schema": SCHEMA, "text": text,
                     "expected": {"name": name, "age": age, "city": city, "occupation": occupation}})
    with open(HERE / "people.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
