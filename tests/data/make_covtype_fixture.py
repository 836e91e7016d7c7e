"""Regenerates tests/data/covtype_2k.csv.gz, the Covertype fixture the default tests use, from the
20,000-row copy (see PROVENANCE.md beside this file):

    python tests/data/make_covtype_fixture.py server/tasks/builtin/hpo-covertype/source/covtype_20k.csv.gz tests/data/covtype_2k.csv.gz

A deterministic stratified sample: every class gets its share of ROWS (largest remainder), but at least
MIN_PER_CLASS rows, so that the loader's stratified 80/20 split keeps at least 5 test rows of each of the
7 classes. Within a class, rows are taken in the order of sha256(f"{SEED}:{row number}"): no random
number generator, so the sample does not depend on library versions. The chosen lines are copied
verbatim, in their original order, under the original header; the gzip header carries no name or time.
"""

import argparse
import gzip
import hashlib
import io
from pathlib import Path

ROWS = 2_000
MIN_PER_CLASS = 25
SEED = 42


def allocate(counts: dict[int, int], total: int, floor: int) -> dict[int, int]:
    """Rows per class: proportional to counts, summing to total, none below floor (or its own count)."""
    fixed: dict[int, int] = {}
    while True:
        rest = {c: n for c, n in counts.items() if c not in fixed}
        left = total - sum(fixed.values())
        share = {c: left * n / sum(rest.values()) for c, n in rest.items()}
        low = [c for c, s in share.items() if s < floor]
        if not low:
            break
        fixed.update({c: min(floor, counts[c]) for c in low})
    chosen = {c: int(s) for c, s in share.items()}
    by_remainder = sorted(share, key=lambda c: (chosen[c] - share[c], c))
    for c in by_remainder[: left - sum(chosen.values())]:
        chosen[c] += 1
    return dict(sorted({**fixed, **chosen}.items()))


def sample_lines(text: str, total: int = ROWS, floor: int = MIN_PER_CLASS, seed: int = SEED) -> str:
    """The fixture's CSV text, drawn from the 20,000-row CSV's text."""
    header, *lines = text.splitlines()
    assert header.split(",")[-1] == "Cover_Type", header
    by_class: dict[int, list[int]] = {}
    for number, line in enumerate(lines):
        by_class.setdefault(int(line.rsplit(",", 1)[1]), []).append(number)
    quota = allocate({c: len(rows) for c, rows in by_class.items()}, total, floor)

    def key(number: int) -> bytes:
        return hashlib.sha256(f"{seed}:{number}".encode()).digest()

    kept = sorted(n for c, rows in by_class.items() for n in sorted(rows, key=key)[: quota[c]])
    return "\n".join([header, *(lines[n] for n in kept)]) + "\n"


def write_gzip(text: str, path: Path) -> None:
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as handle:
        handle.write(text.encode())
    path.write_bytes(buffer.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the 20,000-row covtype_20k.csv.gz")
    parser.add_argument("out", type=Path, help="where to write the fixture (.csv.gz)")
    args = parser.parse_args()
    text = sample_lines(gzip.decompress(args.source.read_bytes()).decode())
    write_gzip(text, args.out)
    rows = text.splitlines()[1:]
    counts = [sum(1 for r in rows if r.endswith(f",{c}")) for c in range(1, 8)]
    print(f"{args.out}: {len(rows)} rows, class counts 1..7 {counts}")
    print(f"sha256 of the CSV text {hashlib.sha256(text.encode()).hexdigest()}")
    print(f"sha256 of the file     {hashlib.sha256(args.out.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main()
