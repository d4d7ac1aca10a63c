"""Regenerate tests/golden/<name>/ from the current code: ``make golden``.

    python -m tests.golden.update

Review the resulting diff like any other change: it is exactly what the operator now renders.
"""

from __future__ import annotations

import shutil

from tests import golden


def main() -> None:
    for name, spec in golden.specs().items():
        target = golden.GOLDEN / name
        if target.exists():
            shutil.rmtree(target)
        target.mkdir()
        files = golden.render(spec)
        for file, content in files.items():
            (target / file).write_text(content, encoding="utf-8")
        (target / golden.INDEX).write_text(golden.index(files), encoding="utf-8")
        print(f"{target.relative_to(golden.GOLDEN.parents[1])}: {len(files)} manifests")


if __name__ == "__main__":
    main()
