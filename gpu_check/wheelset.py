"""The wheels the GPU machine lacks: the pinned list, their download, and the checks that the set is complete
and that the project plus the wheels fit what travels to the machine.

Complete means: every wheel runs on the machine's Python (cp312, manylinux x86_64), every requirement of every
carried wheel (markers evaluated for Python 3.12 on Linux x86_64, extras skipped) is met by a carried wheel or
by a package of the machine (machine_packages.txt), and each package is there in exactly one version (two stop
pip's install). A requirement on a machine package whose version the list does not give is "unverified": on the
machine, `verify_installed` checks it against the versions really installed.
"""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from gpu_check import PACKAGE_DIR, ROOT

PINS_FILE = PACKAGE_DIR / "wheels.txt"
MACHINE_FILE = PACKAGE_DIR / "machine_packages.txt"
WHEEL_DIR = PACKAGE_DIR / "wheels"
# the rehearsal only: the machine's versions of pure-Python packages it has in versions other than the venv's
REHEARSAL_PINS_FILE = PACKAGE_DIR / "rehearsal_wheels.txt"
REHEARSAL_WHEEL_DIR = PACKAGE_DIR / "rehearsal-wheels"
SIZE_LIMIT = 64 * 2**20  # the device tool sends at most 64 MiB: the working tree plus carried paths

MACHINE_PYTHON = (3, 12)
# The manylinux levels pip may pick. The machine's Python 3.12.3 is Ubuntu 24.04's (glibc 2.39); none of the
# pinned wheels needs more than 2.28.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux_2_12_x86_64", "manylinux2010_x86_64", "manylinux_2_5_x86_64",
             "manylinux1_x86_64", "linux_x86_64")
# Where requirement markers are evaluated: the machine, not this interpreter. "extra" is empty, so extras' lines
# (`; extra == "x"`) are skipped.
MARKER_ENVIRONMENT = {
    "python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
    "implementation_version": "3.12.3", "platform_python_implementation": "CPython", "os_name": "posix",
    "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "platform_release": "",
    "platform_version": "", "extra": "",
}


def machine_tags(platforms=PLATFORMS) -> set[Tag]:
    """The wheel tags the machine's CPython 3.12 installs."""
    tags = set(cpython_tags(MACHINE_PYTHON, abis=["cp312"], platforms=list(platforms)))
    tags |= set(compatible_tags(MACHINE_PYTHON, interpreter="cp312", platforms=list(platforms)))
    return tags


def pip_platform_args(platforms=PLATFORMS) -> list[str]:
    """pip's flags for 'wheels for the machine's Python, not this one'."""
    args = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312"]
    for platform in platforms:
        args += ["--platform", platform]
    return args


# -- the lists ------------------------------------------------------------------------------------------
def read_pins(path: Path = PINS_FILE) -> dict[str, str]:
    """wheels.txt: {canonical name: version}; each line NAME==VERSION, '#' starts a comment."""
    pins: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise ValueError(f"{path}:{number}: {line!r} is not NAME==VERSION (the list pins exact versions)")
        key = canonicalize_name(name.strip())
        if key in pins:
            raise ValueError(f"{path}:{number}: {name.strip()} is pinned twice; keep one version")
        pins[key] = version.strip()
    return pins


def read_machine_packages(path: Path = MACHINE_FILE) -> dict[str, str | None]:
    """machine_packages.txt: {canonical name: version, or None where the list gives none}."""
    packages: dict[str, str | None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            packages[canonicalize_name(name.strip())] = version.strip() or None
    return packages


# -- wheels ---------------------------------------------------------------------------------------------
@dataclass
class Wheel:
    path: Path
    name: str  # canonical
    version: str
    tags: frozenset
    requires: list[str]  # Requires-Dist lines, as written
    requires_python: str | None

    @property
    def pure(self) -> bool:
        """Python code for any Python 3 on any platform: importable by the rehearsal's Python too (a py312-only
        wheel such as multiprocess's is not)."""
        return all(tag.interpreter == "py3" and tag.abi == "none" and tag.platform == "any" for tag in self.tags)

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def read_wheel(path: Path) -> Wheel:
    name, version, _, tags = parse_wheel_filename(path.name)
    with zipfile.ZipFile(path) as archive:
        metadata_names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(metadata_names) != 1:
            raise ValueError(f"{path.name}: expected one *.dist-info/METADATA, found {metadata_names}")
        metadata = email.parser.Parser().parsestr(archive.read(metadata_names[0]).decode("utf-8"))
    return Wheel(path, canonicalize_name(name), str(version), frozenset(tags), metadata.get_all("Requires-Dist") or [],
                 metadata.get("Requires-Python"))


def applicable(requirement: Requirement) -> bool:
    """A requirement the machine's pip would install: its marker holds on the machine, and it is no extra's."""
    return requirement.marker is None or requirement.marker.evaluate(dict(MARKER_ENVIRONMENT))


# -- completeness ---------------------------------------------------------------------------------------
@dataclass
class WheelCheck:
    wheels: list[Wheel] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # each one makes the set unusable on the machine
    unverified: list[str] = field(default_factory=list)  # met by a machine package of unknown version
    notes: list[str] = field(default_factory=list)  # e.g. a carried package that replaces the machine's

    @property
    def ok(self) -> bool:
        return not self.problems


def check_wheels(wheel_dir: Path = WHEEL_DIR, pins: dict[str, str] | None = None,
                 machine: dict[str, str | None] | None = None, needed: dict[str, str] | None = None) -> WheelCheck:
    """Is `wheel_dir` complete for the machine? `needed`: distributions the check's code imports ({name: why});
    each must be carried or on the machine."""
    pins = read_pins() if pins is None else pins
    machine = read_machine_packages() if machine is None else machine
    result = WheelCheck()
    files = sorted(wheel_dir.glob("*.whl")) if wheel_dir.is_dir() else []
    if not files:
        result.problems.append(f"no wheels in {_shown(wheel_dir)}: run `make gpu-wheels` (it downloads the "
                               f"{len(pins)} wheels that gpu_check/wheels.txt pins)")
        return result
    for path in files:
        try:
            result.wheels.append(read_wheel(path))
        except (InvalidWheelFilename, ValueError, zipfile.BadZipFile, KeyError) as err:
            result.problems.append(f"{path.name}: not a readable wheel ({err}); delete it and run `make gpu-wheels`")
    carried: dict[str, list[Wheel]] = {}
    for wheel in result.wheels:
        carried.setdefault(wheel.name, []).append(wheel)
    for name, versions in sorted(carried.items()):
        if len(versions) > 1:
            listed = ", ".join(w.path.name for w in versions)
            result.problems.append(f"{name}: {len(versions)} versions carried ({listed}); keep one, pip stops on two")
    for name, version in sorted(pins.items()):
        if name not in carried:
            result.problems.append(f"{name}=={version} is pinned in wheels.txt but not downloaded: "
                                   f"run `make gpu-wheels`")
        elif all(Version(w.version) != Version(version) for w in carried[name]):
            result.problems.append(f"{name}: carried {carried[name][0].version}, wheels.txt pins {version}: "
                                   f"run `make gpu-wheels`")
    for name in sorted(set(carried) - set(pins)):
        result.problems.append(f"{name} {carried[name][0].version} is carried but not in wheels.txt: pin it there "
                               f"or delete {carried[name][0].path.name}")
    supported = machine_tags()
    python = Version(".".join(map(str, MACHINE_PYTHON)) + ".3")
    for wheel in result.wheels:
        if not wheel.tags & supported:
            tags = ", ".join(sorted(str(t) for t in wheel.tags))
            result.problems.append(f"{wheel.path.name}: built for {tags}, which the machine's CPython 3.12 on "
                                   f"manylinux x86_64 does not install")
        if wheel.requires_python and python not in SpecifierSet(wheel.requires_python):
            result.problems.append(f"{wheel.path.name}: needs Python {wheel.requires_python}; the machine has 3.12")
        for line in wheel.requires:
            _check_requirement(result, wheel, line, carried, machine)
    for name, version in sorted(machine.items()):
        if name in carried and name != "python":
            replaced = f" {version}" if version else ""
            result.notes.append(f"carried {name} {carried[name][0].version} is imported instead of the "
                                f"machine's{replaced}")
    for name, why in sorted((needed or {}).items()):
        key = canonicalize_name(name)
        if key not in carried and key not in machine:
            result.problems.append(f"{name} ({why}) is neither on the machine nor carried: add it to "
                                   f"gpu_check/wheels.txt")
    return result


def _check_requirement(result: WheelCheck, wheel: Wheel, line: str, carried: dict[str, list[Wheel]],
                       machine: dict[str, str | None]) -> None:
    try:
        requirement = Requirement(line)
    except InvalidRequirement as err:
        result.problems.append(f"{wheel.path.name}: unreadable requirement {line!r} ({err})")
        return
    if not applicable(requirement):
        return
    name = canonicalize_name(requirement.name)
    spec = requirement.specifier
    wanted = f"{requirement.name}{spec}" if spec else requirement.name
    if name in carried:  # PYTHONPATH puts the carried one first
        version = carried[name][0].version
        if not spec.contains(version, prereleases=True):
            result.problems.append(f"{wheel.name} {wheel.version} needs {wanted}; the carried {name} is {version}")
    elif name in machine:
        version = machine[name]
        if version is None:
            if spec:
                result.unverified.append(f"{wheel.name} needs {wanted}: the machine has {name}, version not listed")
        elif not spec.contains(version, prereleases=True):
            result.problems.append(f"{wheel.name} {wheel.version} needs {wanted}; the machine has {name} {version}: "
                                   f"carry a matching {name} in gpu_check/wheels.txt")
    else:
        result.problems.append(f"{wheel.name} {wheel.version} needs {wanted}, which is neither on the machine nor "
                               f"carried: add it to gpu_check/wheels.txt")


def check_rehearsal_wheels(wheel_dir: Path = REHEARSAL_WHEEL_DIR, pins_file: Path = REHEARSAL_PINS_FILE,
                           machine: dict[str, str | None] | None = None) -> list[str]:
    """The machine's versions the rehearsal imitates: each pinned one there, pure Python (any Python 3 imports it),
    and the version machine_packages.txt gives. Returns the problems."""
    machine = read_machine_packages() if machine is None else machine
    pins = read_pins(pins_file)
    wheels = {w.name: w for w in map(read_wheel, sorted(wheel_dir.glob("*.whl")))} if wheel_dir.is_dir() else {}
    problems = []
    for name, version in sorted(pins.items()):
        wheel = wheels.get(name)
        if wheel is None or Version(wheel.version) != Version(version):
            problems.append(f"{name}=={version} ({pins_file.name}) is not in {_shown(wheel_dir)}: "
                            f"run `make gpu-wheels`")
        elif not wheel.pure:
            problems.append(f"{wheel.path.name}: not pure Python, the rehearsal's Python cannot import it")
        if machine.get(name) != version:
            problems.append(f"{name}=={version} ({pins_file.name}) is not the machine's version "
                            f"({machine.get(name) or 'not listed'} in {MACHINE_FILE.name})")
    return problems


def verify_installed(wheels: list[Wheel]) -> list[str]:
    """On the machine, after the install: each applicable requirement of each carried wheel against the versions
    this interpreter really imports (carried folder first on sys.path). Returns the problems."""
    from importlib.metadata import PackageNotFoundError, version

    problems = []
    for wheel in wheels:
        try:
            found = version(wheel.name)
        except PackageNotFoundError:
            problems.append(f"{wheel.name}: installed from {wheel.path.name}, but not importable (PYTHONPATH?)")
            continue
        if Version(found) != Version(wheel.version):
            problems.append(f"{wheel.name}: {found} is found first, not the carried {wheel.version} (PYTHONPATH?)")
        for line in wheel.requires:
            requirement = Requirement(line)
            if not applicable(requirement):
                continue
            try:
                have = version(requirement.name)
            except PackageNotFoundError:
                problems.append(f"{wheel.name} needs {requirement}: not installed here")
                continue
            if requirement.specifier and not requirement.specifier.contains(have, prereleases=True):
                problems.append(f"{wheel.name} needs {requirement.name}{requirement.specifier}: this machine "
                                f"has {have}")
    return problems


# -- what travels ---------------------------------------------------------------------------------------
def project_files(root: Path = ROOT) -> list[Path]:
    """What the device tool sends of the checkout: tracked files and untracked files git does not ignore (what
    exists of them), and a shared/ folder if there is one."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape").split("\0")
    files = {root / name for name in listed if name}
    shared = root / "shared"
    if shared.is_dir():
        files |= {path for path in shared.rglob("*") if path.is_file() or path.is_symlink()}
    return sorted(path for path in files if path.is_symlink() or path.is_file())


def travel_size(root: Path = ROOT, wheel_dir: Path = WHEEL_DIR, limit: int = SIZE_LIMIT) -> dict:
    """Bytes of the project files and of the wheels, and whether together they fit the device tool's limit."""
    project = sum(path.lstat().st_size for path in project_files(root))
    wheels = sum(path.stat().st_size for path in wheel_dir.glob("*.whl")) if wheel_dir.is_dir() else 0
    return {"project_bytes": project, "wheels_bytes": wheels, "total_bytes": project + wheels, "limit_bytes": limit,
            "fits": project + wheels <= limit}


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


# -- download and install -------------------------------------------------------------------------------
def download(wheel_dir: Path = WHEEL_DIR, pins_file: Path = PINS_FILE, python: str = sys.executable) -> WheelCheck:
    """Fetch exactly the pinned wheels for the machine; wheels of other versions or packages are removed first,
    so the folder holds one version of each."""
    fetch(pins_file, wheel_dir, python)
    return check_wheels(wheel_dir, read_pins(pins_file))


def fetch(pins_file: Path, wheel_dir: Path, python: str = sys.executable) -> None:
    """pip download of a pin list's wheels for the machine's Python, into a folder that ends up holding just them."""
    pins = read_pins(pins_file)
    wheel_dir.mkdir(parents=True, exist_ok=True)
    for path in wheel_dir.glob("*.whl"):
        try:
            name, version, _, _ = parse_wheel_filename(path.name)
            pinned = pins.get(canonicalize_name(name))
        except InvalidWheelFilename:
            pinned = version = None
        if pinned is None or Version(pinned) != version:
            print(f"removing {path.name} (not pinned in {pins_file.name})")
            path.unlink()
    command = [python, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps", *pip_platform_args(),
               "--dest", str(wheel_dir), *[f"{name}=={version}" for name, version in sorted(pins.items())]]
    print(" ".join(command[:3] + ["...", f"{len(pins)} wheels of {pins_file.name}", "->", _shown(wheel_dir)]),
          flush=True)
    subprocess.run(command, check=True)


def install(wheels: list[Wheel], target: Path, python: str = sys.executable, for_machine: bool = False) -> None:
    """pip-install the wheels, without an index and without their dependencies, into `target`. `for_machine`:
    as for the machine's CPython 3.12 whatever this interpreter is (the rehearsal's install check)."""
    target.mkdir(parents=True, exist_ok=True)
    command = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--no-deps",
               "--no-compile", "--no-cache-dir", "--upgrade", "--target", str(target)]
    if for_machine:
        command += pip_platform_args()
    subprocess.run(command + [str(w.path) for w in wheels], check=True, env={**os.environ, "PYTHONPATH": ""})


def describe(check: WheelCheck, size: dict | None = None) -> str:
    """The wheel table and the verdict, as text (make gpu-wheels prints it)."""
    width = max([len(w.path.name) for w in check.wheels] + [5])
    lines = [f"{'wheel':{width}s} {'size':>9s}"]
    for wheel in sorted(check.wheels, key=lambda w: w.name):
        lines.append(f"{wheel.path.name:{width}s} {mib(wheel.size):>9s}")
    total = sum(w.size for w in check.wheels)
    lines.append(f"{len(check.wheels)} wheels, {mib(total)}")
    if size:
        verdict = "fits" if size["fits"] else "DOES NOT FIT"
        lines.append(f"project files {mib(size['project_bytes'])} + wheels {mib(size['wheels_bytes'])} = "
                     f"{mib(size['total_bytes'])}: {verdict} in the {mib(size['limit_bytes'])} the device tool sends")
    lines += [f"note: {note}" for note in check.notes]
    lines += [f"unverified (checked on the machine): {line}" for line in check.unverified]
    lines += [f"PROBLEM: {line}" for line in check.problems]
    lines.append("complete for the GPU machine" if check.ok else f"INCOMPLETE: {len(check.problems)} problem(s)")
    return "\n".join(lines)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)
