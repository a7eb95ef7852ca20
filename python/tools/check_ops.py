"""Runs the sweep for some ops (or all) and prints each op's result and failures.

    python python/tools/check_ops.py add.Tensor abs        # focused
    python python/tools/check_ops.py --all --out F.json    # everything
    TESSERA_SWEEP_SEED=3 python python/tools/check_ops.py bmm --exact   # bmm's samples of a full run, seed 3
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ops", nargs="*")
    p.add_argument("--all", action="store_true")
    p.add_argument("--out")
    p.add_argument("--quiet", action="store_true", help="print only failing ops and the totals")
    p.add_argument("--exact", action="store_true",
                   help="walk every OpInfo (slower), so focused ops get exactly their full-run samples")
    a = p.parse_args()
    only = None if a.all else {o.removeprefix("aten::").removesuffix(".default") for o in a.ops}
    report = sweep.run(only, a.out, exact=a.exact)
    passed = failed = 0
    for name, r in report["ops"].items():
        ok = r["failed"] == 0 and r["passed"] > 0
        passed += ok
        failed += not ok
        if a.quiet and ok:
            continue
        print(f"{'PASS' if ok else 'FAIL'} {name}: {r['passed']} passed, {r['failed']} failed, dtypes {','.join(r['dtypes'])}")
        for e in r["errors"]:
            print(f"    {e}")
    if only:
        for o in sorted(only - set(report["ops"])):
            print(f"NONE {o}: no sample reached it")
    print(f"{passed} ops passing, {failed} failing, {report['wall_s']} s")


if __name__ == "__main__":
    main()
