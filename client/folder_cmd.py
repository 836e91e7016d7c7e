"""`autoresearch-mcp init`: start a task folder from a script (apply_cmd.py takes a run's result back).

`init PATH` writes an autoresearch.toml next to an existing script, inferring what it can from the
script's text: the command, the metric (the `name: value` lines it prints) and its direction (from the
name), the params it reads from AUTORESEARCH_PARAMS with their defaults. What cannot be read off the
script is given as a flag, or left for the user to check (each guessed range says so in a comment).
"""

import argparse
import ast
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

from autoresearch_mcp.contract.errors import ResearchError

SPEC_FILE = "autoresearch.toml"
LOWER_IS_BETTER = ("loss", "error", "err", "mse", "mae", "rmse", "perplexity", "ppl", "time", "seconds", "ms")
HIGHER_IS_BETTER = ("acc", "accuracy", "f1", "auc", "score", "r2", "precision", "recall", "reward", "speedup")
FRACTIONS = ("dropout", "subsample", "frac", "fraction", "ratio", "momentum", "beta", "rate_decay")
# `print(f"val_loss: {loss}")`, `print("val_loss:", loss)`, `print("val_loss: 0.5")`: the name it prints.
METRIC_PRINT = re.compile(r"""print\(\s*f?["']\s*([A-Za-z_][A-Za-z0-9_.\-/]*)\s*[:=]\s*[{"',\d.-]""")


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "init",
        help="write an autoresearch.toml next to your script (a task folder)",
        epilog="example:\n  autoresearch-mcp init my-project/train.py --metric val_loss",
    )
    p.add_argument("path", type=Path, help="the script, or its folder when it holds one obvious script")
    p.add_argument("--name", help="the task's name (default: the folder's name)")
    p.add_argument("--metric", help="the metric line the script prints (default: read off the script)")
    p.add_argument("--direction", choices=("minimize", "maximize"), help="default: from the metric's name")
    p.add_argument("--timeout", type=float, default=600, help="seconds one run of the script may take")
    p.add_argument("--code", action="store_true", help="the agent edits the script (work = code)")
    p.add_argument(
        "--evaluate",
        action="store_true",
        help="a trusted evaluator decides the metric: writes evaluate.py (a skeleton to adapt), secret/ for "
        "what only it may read, and [evaluate]",
    )
    p.add_argument("--force", action="store_true", help="replace an existing autoresearch.toml")
    p.set_defaults(func=init_main)


# -- init ---------------------------------------------------------------------------------------------
def find_script(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise ResearchError(f"{path}: no such file or folder")
    scripts = sorted(path.glob("*.py"))
    reading = [p for p in scripts if "AUTORESEARCH_PARAMS" in p.read_text(errors="replace")]
    named = [p for p in scripts if p.name == "train.py"]
    for candidates in (reading, named, scripts):
        if len(candidates) == 1:
            return candidates[0]
    listed = ", ".join(p.name for p in scripts) or "none"
    raise ResearchError(f"{path}: which script? give its path (Python files here: {listed})")


def metrics_printed(source: str) -> list[str]:
    return list(dict.fromkeys(METRIC_PRINT.findall(source)))


def guess_direction(metric: str) -> str | None:
    words = re.split(r"[_.\-/]", metric.lower())

    def says(tokens: tuple[str, ...]) -> bool:  # "logloss" says loss; short tokens must be whole words
        return any(word == t or (len(t) > 3 and t in word) for word in words for t in tokens)

    if says(LOWER_IS_BETTER):
        return "minimize"
    if says(HIGHER_IS_BETTER):
        return "maximize"
    return None


def params_read(source: str) -> dict[str, Any]:
    """`params.get("lr", 0.1)` and `params["lr"]` on whatever holds the parsed AUTORESEARCH_PARAMS:
    each name with its default where the script gives one (None where it gives none)."""
    found: dict[str, Any] = {}
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and not (isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "environ")
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            default = node.args[1] if len(node.args) > 1 else None
            value = default.value if isinstance(default, ast.Constant) else None
            found.setdefault(node.args[0].value, value)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
            if isinstance(key, str) and isinstance(node.value, ast.Name) and "param" in node.value.id.lower():
                found.setdefault(key, None)
    return {name: value for name, value in found.items() if name.isidentifier()}


def param_table(name: str, default: Any) -> list[str]:
    """A [params.NAME] table from a default: the range is a guess, and says so."""
    lines = [f"[params.{name}]"]
    if isinstance(default, bool):
        lines += ['type = "bool"', f"default = {str(default).lower()}"]
    elif isinstance(default, int) and default > 0:
        lines += [
            'type = "int"',
            f"low = {max(1, default // 10)}",
            f"high = {default * 10}",
            f"default = {default}",
        ]
        lines.append("# low and high are guessed from the default: check them")
    elif isinstance(default, float) and 0 < default <= 1 and any(word in name.lower() for word in FRACTIONS):
        lines += ['type = "float"', "low = 0.0", "high = 1.0", f"default = {default}"]
    elif isinstance(default, float) and default > 0:
        lines += ['type = "float"', f"low = {default / 100:g}", f"high = {default * 100:g}", "log = true"]
        lines += [f"default = {default}", "# low and high are guessed from the default: check them"]
    elif isinstance(default, int | float) and default == 0:
        lines += [
            f'type = "{type(default).__name__}"',
            "low = 0",
            "high = 1" if isinstance(default, int) else "high = 1.0",
        ]
        lines += [f"default = {default}", "# high is guessed (the default is 0): check it"]
    elif isinstance(default, str):
        lines += [
            'type = "categorical"',
            f"choices = [{default!r}]".replace("'", '"'),
            "# add the other choices",
        ]
    else:
        lines += ['type = "float"', "low = 0.0", "high = 1.0", "# no default in the script: set the range"]
    return lines


class Init(NamedTuple):
    target: Path  # the autoresearch.toml to write
    text: str
    check: list[str]  # what the user should check
    tunable: bool  # params work the script takes: [params] written, AUTORESEARCH_PARAMS read


def init_toml(args: argparse.Namespace) -> Init:
    """The file to write, its text, what the user should check, and whether it is params work."""
    script = find_script(args.path.expanduser().resolve())
    folder = script.parent
    source = script.read_text(encoding="utf-8", errors="replace")
    check: list[str] = []
    printed = metrics_printed(source)
    metric = args.metric or (printed[0] if printed else None)
    if metric is None:
        raise ResearchError(
            f"{script.name} prints no `name: value` line that I can see: give the metric with --metric NAME "
            "(the script must print `NAME: <number>` on stdout)"
        )
    if not args.metric and len(printed) > 1:
        check.append(f"metric: took {metric!r}, the first of {', '.join(printed)} (--metric to choose)")
    direction = args.direction or guess_direction(metric)
    if direction is None:
        raise ResearchError(f"is a lower or a higher {metric} better? say --direction minimize or maximize")
    name = args.name or re.sub(r"[^a-z0-9._-]+", "-", folder.name.lower()).strip("-._") or "my-task"
    params = params_read(source)
    if "AUTORESEARCH_PARAMS" not in source:
        check.append(
            f"{script.name} does not read AUTORESEARCH_PARAMS: params = json.loads(os.environ"
            '["AUTORESEARCH_PARAMS"]) gives it the [params] values'
        )
    lines = [
        "[task]",
        f'name = "{name}"',
        f'description = "{name}: what {script.name} trains and evaluates (shown to the model; say more)"',
        f'command = ["python", "{script.name}"]',
        f'metric = "{metric}"',
        f'direction = "{direction}"',
        f"timeout_s = {args.timeout:g}",
    ]
    if script.name != "train.py" or args.code:
        lines.append(f'edit = ["{script.name}"]')
    if args.code:
        lines.append('work = "code"')
    for param, default in params.items():
        lines += ["", *param_table(param, default)]
        if isinstance(default, str):
            check.append(
                f"params.{param}: the one choice {default!r} the script uses; add the others to choices"
            )
        elif default is None or not isinstance(default, bool | int | float):
            check.append(f"params.{param}: no default in the script; set its type and range")
    if any("guessed" in line for line in lines):
        check.append("the guessed ranges (marked in the file)")
    tunable = bool(params) and not args.code and "AUTORESEARCH_PARAMS" in source
    return Init(folder / SPEC_FILE, "\n".join(lines) + "\n", check, tunable)


def init_main(args: argparse.Namespace) -> int:
    target, text, check, tunable = init_toml(args)
    if target.exists() and not args.force:
        raise ResearchError(f"{target} exists: --force replaces it")
    if args.evaluate:
        text += EVALUATE_SECTION
        check += write_evaluator(target.parent, text)
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    for item in check:
        print(f"  check: {item}")
    step = next_step(target.parent, params=tunable)
    print(
        step.replace("then", "then, once the evaluator's two checks above are done", 1)
        if args.evaluate
        else step
    )
    return 0


def next_step(folder: Path, *, params: bool) -> str:
    """The command to try the folder with: the scripted double plays params work (no model, no key)
    on a script that reads its params; anything else takes a model that edits the script."""
    folder_arg = shlex.quote(str(folder))
    if params:
        return f"then: autoresearch-mcp run --task {folder_arg} --llm scripted --budget 3"
    return (
        f"then, with a model that edits the script: autoresearch-mcp run --task {folder_arg} --budget 3 "
        "(needs ANTHROPIC_API_KEY; a local model: --llm openai --base-url URL); the scripted double "
        "plays only params that the script reads from AUTORESEARCH_PARAMS"
    )


# -- init --evaluate ------------------------------------------------------------------------------------
EVALUATE_SECTION = """
[evaluate]
command = ["python", "evaluate.py"]
reads = ["secret/"]
outputs = ["predictions.csv"]
"""
EVALUATOR = '''"""The evaluator of {name} ([evaluate] in autoresearch.toml): it alone decides {metric}. It runs after
every process of {script} has ended, in a fresh copy of this folder (your files, never the agent's
versions) holding the predictions.csv {script} left, and it may read secret/, which no version of
{script} can. Adapt it to your task: the `{metric}: <number>` line it prints is the metric.
"""

import csv

with open("predictions.csv") as file:
    predictions = [float(row[0]) for row in csv.reader(file) if row]
with open("secret/labels.csv") as file:
    labels = [float(row[0]) for row in csv.reader(file) if row]
if len(predictions) != len(labels):
    raise SystemExit(f"predictions.csv has {{len(predictions)}} rows, secret/labels.csv {{len(labels)}}")
{score}
print(f"{metric}: {{value}}")
'''
SCORES = {
    "minimize": "value = sum((p - y) ** 2 for p, y in zip(predictions, labels)) / len(labels)  # mean squared error",
    "maximize": "value = sum(p == y for p, y in zip(predictions, labels)) / len(labels)  # accuracy",
}


def write_evaluator(folder: Path, toml: str) -> list[str]:
    """evaluate.py (unless there is one) and secret/; what the user still has to do."""
    task = tomllib.loads(toml)["task"]
    script = task["command"][-1]
    evaluator = folder / "evaluate.py"
    done = []
    if evaluator.exists():
        done.append(
            "evaluate.py exists and was left as it is: it must print `" + task["metric"] + ": <number>`"
        )
    else:
        text = EVALUATOR.format(
            name=task["name"], metric=task["metric"], script=script, score=SCORES[task["direction"]]
        )
        evaluator.write_text(text, encoding="utf-8")
        print(f"wrote {evaluator} (a skeleton: adapt how it scores)")
    (folder / "secret").mkdir(exist_ok=True)
    return [
        *done,
        f"put what only the evaluator may read in {folder / 'secret'} (the skeleton reads labels.csv, one "
        "per row)",
        f"make {script} write predictions.csv (one per row, in the labels' order) instead of scoring itself",
    ]
