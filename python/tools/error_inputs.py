"""OpInfo's `error_inputs` through Tessera: each sample that torch refuses is passed to the table
overloads named like the OpInfo; Tessera must refuse it too, with a `tessera.TesseraError`
(ArgumentError, UnsupportedError, ...). Counted per overload:
  raised    Tessera raised a TesseraError, as torch did;
  accepted  Tessera returned a value where torch raised (a silent wrong answer);
  other     Tessera raised something else (a bug in the bridge).

    python python/tools/error_inputs.py [OP ...] [--out F.json]
"""

import argparse
import json
import os
import sys
import warnings
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sweep  # noqa: E402
import tessera  # noqa: E402
from oracles import clone_args  # noqa: E402
from tessera import ops as tops  # noqa: E402


def run(only=None):
    from torch.testing._internal.common_methods_invocations import op_db

    warnings.filterwarnings("ignore")
    table = {t["name"]: t for t in tops.table()}
    counts = defaultdict(lambda: defaultdict(int))
    examples = defaultdict(list)
    for opinfo in op_db:
        direct = [n for n in sweep.direct_overloads(table, opinfo) if only is None or n in only]
        if not direct:
            continue
        sweep.seed_for("error_inputs", opinfo.name, opinfo.variant_test_name)
        try:
            errors = list(opinfo.error_inputs("cpu"))
        except Exception:
            continue
        for e in errors:
            s = e.sample_input
            args = (s.input, *s.args)
            for name in direct:
                func = sweep._aten(name)
                try:
                    func(*clone_args(args), **clone_args(s.kwargs))
                    continue  # torch accepts it as this overload: not an error input here
                except Exception:
                    pass
                try:
                    tops.call(name, *clone_args(args), **clone_args(dict(s.kwargs)))
                    verdict = "accepted"
                except tessera.TesseraError:
                    verdict = "raised"
                except Exception as x:
                    verdict = "other"
                    if len(examples[name]) < 2:
                        examples[name].append(f"{type(x).__name__}: {x}"[:300])
                counts[name][verdict] += 1
                if verdict == "accepted" and len(examples[name]) < 2:
                    examples[name].append(f"accepted where torch raised {e.error_type.__name__}: {e.error_regex}"[:300])
    return {n: {**dict(c), "examples": examples.get(n, [])} for n, c in sorted(counts.items())}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ops", nargs="*")
    p.add_argument("--out")
    a = p.parse_args()
    only = {o.removeprefix("aten::").removesuffix(".default") for o in a.ops} or None
    r = run(only)
    total = defaultdict(int)
    for name, c in r.items():
        for k in ("raised", "accepted", "other"):
            total[k] += c.get(k, 0)
        if c.get("accepted") or c.get("other"):
            print(f"{name}: {c}")
    print(f"error inputs: {dict(total)} over {len(r)} overloads")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"totals": dict(total), "ops": r}, f, indent=1)


if __name__ == "__main__":
    main()
