"""For the rehearsal: a site folder of links to this venv's distributions that the GPU machine also has (or that
travel as wheels this Python cannot import, such as cp312 builds), and nothing else.

trace/sitecustomize.py puts it in place of the venv's site-packages in every process of a rehearsal step, so a
module the machine lacks is missing here too: the step fails with the import error it would give there. The
versions are still this venv's (requirements/cpu.lock), not the machine's, and a venv version of a machine
package may need packages the machine's version does not (huggingface_hub 2.4 needs httpcore2, 1.33 does not):
those dependencies of machine packages are linked too, and reported ("dependencies_only"), never a carried
wheel's dependencies, which are what the rehearsal checks.
"""

from __future__ import annotations

import sysconfig
from importlib.metadata import distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"]).resolve()


def build(dest: Path, machine: set[str], carried: set[str], replaced: set[str] = frozenset(),
          source: Path | None = None) -> dict:
    """Link into `dest` every top-level entry (package, module, .pth, .libs folder, .dist-info) of each distribution
    in `source` that is a machine package, a dependency of one (as installed here), or in `carried`; `replaced`:
    machine packages installed into `dest` in the machine's versions instead (their wheels in the rehearsal's list),
    left out here. Returns {"linked", "dependencies_only", "left_out"}: canonical names."""
    source = source or site_packages()
    dest.mkdir(parents=True, exist_ok=True)
    installed = {canonicalize_name(d.metadata["Name"] or ""): d for d in distributions(path=[str(source)])}
    installed = {name: dist for name, dist in installed.items() if name not in replaced}
    allowed, queue = set(), [name for name in machine if name in installed]
    while queue:
        name = queue.pop()
        if name in allowed:
            continue
        allowed.add(name)
        for line in installed[name].requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):  # this interpreter
                queue.append(canonicalize_name(requirement.name))
        queue = [n for n in queue if n in installed]
    dependencies_only = allowed - machine
    allowed |= {name for name in carried if name in installed}
    for name in sorted(allowed):
        for top in _top_level_entries(installed[name], source):
            link = dest / top
            if not link.exists() and not link.is_symlink():
                link.symlink_to(source / top)
    return {"linked": sorted(allowed), "dependencies_only": sorted(dependencies_only),
            "left_out": sorted(set(installed) - allowed)}


def _top_level_entries(dist, source: Path) -> set[str]:
    entries = {Path(dist._path).name} if hasattr(dist, "_path") else set()  # the .dist-info folder
    for file in dist.files or []:
        parts = Path(file).parts
        if parts and parts[0] != ".." and (source / parts[0]).exists():
            entries.add(parts[0])
    return entries
