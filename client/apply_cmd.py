"""`autoresearch-mcp apply RUN_ID --to PATH`: a run's result, written back where the user says.

The server never writes a user's folder, so this is how a result leaves it. What a run's result is
depends on its work:
- params: the best's params, as the defaults of `[params]` in a folder's autoresearch.toml (its
  comments and layout kept), or as one JSON object in a `.json` file;
- code: a version of the edited files (the best's by default, or --version N), each by its name under a
  folder, or the one file at a file path. Code never goes into a `.json` or `.toml` file.
A folder gets both where the run changed both. Every write opens the file with O_NOFOLLOW and stays
under the folder it was given: a link in the user's folder is never written through.
"""

import argparse
import difflib
import errno
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import tomlkit
from tomlkit.exceptions import TOMLKitError

from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.client.inspect_cmd import add_server_arguments, resolve_run, server_for
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.files import edited_files, unpack
from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.contract.tools import Uri

SPEC_FILE = "autoresearch.toml"
PARAMS_SUFFIXES = (".json", ".toml")


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "apply",
        help="write a run's result to a path of yours: the best params (into autoresearch.toml or a "
        ".json file) and the edited files (the best's version, or --version N)",
        epilog="examples:\n  autoresearch-mcp apply latest --to my-project/ --dry-run"
        "\n  autoresearch-mcp apply r-0123456789 --to best-params.json",
    )
    add_server_arguments(p)
    p.add_argument("run_id", help="a run id, or 'latest'")
    p.add_argument(
        "--to",
        type=Path,
        required=True,
        help="a folder (each edited file by its name; the params into its autoresearch.toml), a .json or "
        ".toml file for the params, or one file for the one edited file",
    )
    p.add_argument(
        "--version", type=int, help="the version of the edited files to write (default: the best's)"
    )
    p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    p.set_defaults(func=apply_main)


@dataclass
class Write:
    """One file to write: where, the text, and what it holds (for the line that reports it)."""

    path: Path
    text: str
    what: str


def apply_main(args: argparse.Namespace) -> int:
    return anyio.run(_apply, args)


async def _apply(args: argparse.Namespace) -> int:
    to = args.to.expanduser()
    async with server_for(args) as rc:
        run = await resolve_run(rc, args.run_id)
        params = dict(run.best.params) if run.best is not None and args.version is None else {}
        version = args.version or (run.best.artifact_version if run.best else None)
        if version is None:
            raise ResearchError(f"run {run.id} has no best yet: give --version N for a version of its files")
        # The files go back where the run changed them (or a version is asked for by number); a
        # params file takes only the params.
        code = (args.version is not None or version > 1) and not (params and to.suffix in PARAMS_SUFFIXES)
        source = await version_source(rc, run.id, version) if code else ""
    if not params and not code:
        raise ResearchError(
            f"run {run.id}'s best is its original files (v1) with no params: nothing to write back"
        )
    writes, notes = plan_writes(run, to, params, source if code else None, version)
    what = "would write" if args.dry_run else "wrote"
    for write in writes:
        diff = write_file(write, dry_run=args.dry_run)
        print(f"{what} {write.path} ({write.what}){': unchanged' if not diff else ''}")
        for line in diff:
            print(line)
    for note in notes:
        print(note)
    return 0


async def version_source(rc: ResearchClient, run_id: str, version: int) -> str:
    uri = Uri.VERSION.of(run_id=run_id, version=version)
    try:
        contents = (await rc.client.read_resource(uri)).contents
    except Exception as exc:  # the SDK's MCPError: an unknown version
        raise ResearchError(f"run {run_id} has no version {version}: {exc}") from None
    return contents[0].text  # type: ignore[union-attr]


def plan_writes(
    run: Run, to: Path, params: dict[str, Any], source: str | None, version: int
) -> tuple[list[Write], list[str]]:
    """What to write for `--to`, and the notes on what is left unwritten; a target that cannot take
    what the run produced is refused in one line."""
    writes: list[Write] = []
    notes: list[str] = []
    of = f"of {run.id}"
    if to.suffix in PARAMS_SUFFIXES:
        if not params:
            raise ResearchError(
                f"{to}: a {to.suffix} file takes params, and run {run.id}'s result is a version of its "
                f"files ({', '.join(edited_files(run.config))}): give a folder or the path of the file"
            )
        if to.suffix == ".json":
            writes.append(Write(to, json.dumps(params, indent=2) + "\n", f"the best's params {of}"))
        else:
            writes.append(
                Write(to, toml_with_defaults(to, params, notes), f"the best's params as defaults {of}")
            )
        if source is None and version > 1:
            notes.append(f"the best's files (v{version}) are not written: `--to FOLDER` writes them too")
        return writes, notes
    if source is not None:
        files = unpack(source, edited_files(run.config))
        if len(files) > 1 and to.exists() and not to.is_dir():
            raise ResearchError(f"{to} is a file; the run edited {len(files)} files: give a folder")
        folder = to.is_dir() or len(files) > 1
        for name, text in files.items():
            path = to / name if folder else to
            if folder and not path.parent.resolve().is_relative_to(to.resolve()):
                raise ResearchError(
                    f"{path}: a link on the way leads out of {to}; apply writes only inside it"
                )
            writes.append(Write(path, text, f"v{version} {of}"))
    elif not to.is_dir():
        raise ResearchError(
            f"run {run.id}'s result is params: --to FOLDER writes them into its {SPEC_FILE}, "
            "--to FILE.json into a JSON file"
        )
    if params and to.is_dir():
        spec = to / SPEC_FILE
        if spec.is_file():
            writes.append(
                Write(spec, toml_with_defaults(spec, params, notes), f"the best's params as defaults {of}")
            )
        else:
            shown = " ".join(f"{key}={value}" for key, value in params.items())
            notes.append(
                f"no {SPEC_FILE} in {to}: the best's params ({shown}) are not written; --to FILE.json does"
            )
    return writes, notes


def toml_with_defaults(path: Path, params: dict[str, Any], notes: list[str]) -> str:
    """The toml at `path` with each `[params.NAME]` default set to the run's value, all else as it was."""
    if path.is_symlink():
        raise ResearchError(f"{path} is a symbolic link: apply writes only regular files")
    try:
        doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResearchError(f"{path}: no such file; --to FILE.json writes the params to a new file") from None
    except (OSError, UnicodeDecodeError, TOMLKitError) as exc:
        raise ResearchError(f"{path}: {exc}") from None
    tables = doc.get("params")
    if not isinstance(tables, dict):
        raise ResearchError(
            f"{path} has no [params] tables to set defaults in; --to FILE.json writes the params"
        )
    missing = []
    for name, value in params.items():
        table = tables.get(name)
        if isinstance(table, dict):
            table["default"] = value
        else:
            missing.append(name)
    if missing:
        notes.append(f"{path} has no [params.NAME] for {', '.join(missing)}: left out")
    return tomlkit.dumps(doc)


def write_file(write: Write, *, dry_run: bool) -> list[str]:
    """Write one file (never through a link) unless `dry_run`; the diff against what was there."""
    path = write.path
    if path.is_symlink():
        raise ResearchError(
            f"{path} is a symbolic link: apply writes only regular files (a link may lead out of your "
            "folder); write to the file it points to, or replace the link with a file"
        )
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    diff = list(
        difflib.unified_diff(
            old.splitlines(), write.text.splitlines(), str(path), f"{path} (new)", lineterm=""
        )
    )
    if dry_run or not diff:
        return diff
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link put there since the check above
            raise ResearchError(f"{path} is a symbolic link: apply writes only regular files") from None
        raise ResearchError(f"{path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(write.text)
    return diff
