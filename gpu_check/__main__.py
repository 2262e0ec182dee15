"""python -m gpu_check {download,check-wheels,run,reference}

    download       fetch the pinned wheels for the GPU machine into gpu_check/wheels/, and the machine's versions
                   the rehearsal imitates into gpu_check/rehearsal-wheels/ (make gpu-wheels)
    check-wheels   is gpu_check/wheels/ complete for the machine, and do project + wheels fit in 64 MiB?
    run            the acceptance run with CUDA, else its rehearsal (make gpu-check; see check.py)
    reference      measure the toy models' CPU accuracy the eval step compares with (toy_eval_reference.json)
"""

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command == "run":
        from gpu_check.check import main as run

        return run(rest)
    if command in ("download", "check-wheels"):
        import argparse
        import subprocess

        from gpu_check import wheelset

        parser = argparse.ArgumentParser(prog=f"python -m gpu_check {command}")
        parser.add_argument("--dest", type=Path, default=wheelset.WHEEL_DIR, help="the wheel folder")
        dest = parser.parse_args(rest).dest
        if command == "download":
            try:
                check = wheelset.download(dest)
                # and, not carried, the machine's versions of packages the rehearsal imitates
                wheelset.fetch(wheelset.REHEARSAL_PINS_FILE, wheelset.REHEARSAL_WHEEL_DIR)
            except subprocess.CalledProcessError as err:
                print(f"gpu_check download: pip failed ({err}); pip's message is above", file=sys.stderr)
                return 1
        else:
            check = wheelset.check_wheels(dest)
        size = wheelset.travel_size(wheel_dir=dest)
        print(wheelset.describe(check, size))
        return 0 if check.ok and size["fits"] else 1
    if command == "reference":
        from gpu_check.steps import make_reference

        reference = make_reference()
        for form, model in reference["models"].items():
            print(f"{form}: {model['correct']}/{model['n']}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
