"""uv's flags for the package sources pip is configured with (`pip config list`: pip.conf files and PIP_* variables):
find-links, index URLs and constraints, so `uv pip install` resolves from the same places under the same caps as
`pip install` would. uv reads none of pip's configuration itself. Prints the flags on one line; nothing if pip has
none (then both use PyPI)."""

from __future__ import annotations

import shlex
import subprocess
import sys

FLAGS = {"find-links": "--find-links", "index-url": "--index-url", "extra-index-url": "--extra-index-url",
         "constraint": "--constraint"}


def main() -> None:
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             check=True).stdout
    seen: dict[str, list[str]] = {}
    for line in listing.splitlines():  # e.g. global.find-links='/opt/wheels', :env:.find-links='/opt/wheels'
        name, _, value = line.partition("=")
        key = name.rsplit(".", 1)[-1]
        if key in FLAGS:
            for item in shlex.split(shlex.split(value)[0] if value else ""):
                if item not in seen.setdefault(key, []):
                    seen[key].append(item)
    args = [a for key, values in seen.items() for v in values for a in (FLAGS[key], v)]
    if len(seen.get("extra-index-url", [])) + len(seen.get("find-links", [])) + ("index-url" in seen) > 1:
        args.append("--index-strategy=unsafe-best-match")  # pip's rule: the best version from any source
    print(shlex.join(args))


if __name__ == "__main__":
    main()
