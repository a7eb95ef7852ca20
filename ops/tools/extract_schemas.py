"""Writes ops/aten_ops.json: the ATen overloads Tessera implements, with their schemas, read
from the installed PyTorch (torch's own registry and torchgen's schema parser).

The set: every overload tagged `core` (the Core ATen IR), their in-place (`add_`) and `.out`
forms, and the extra ops listed in extra_ops.txt (ops PyTorch/XLA lowers and real models hit).
Run with the torch the Makefile installs: `.venv/bin/python ops/tools/extract_schemas.py`.
"""

import json
import re
import pathlib
import sys

import torch
from torchgen.model import FunctionSchema, SchemaKind

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE.parent / "aten_ops.json"


# Arguments torch's kernels write although the schema does not annotate them: the CPU kernel
# of `native_batch_norm` updates `running_mean`/`running_var` in training mode, as the
# annotated `_native_batch_norm_legit` does. Marked written here so a call writes them back
# (the `.out` overload then has its own lowering: the functional op's writes follow its
# results, which the `out` arguments take).
UNANNOTATED_WRITES = {
    "native_batch_norm": {"running_mean", "running_var"},
    "native_batch_norm.out": {"running_mean", "running_var"},
}


def full_name(name, overload):
    return f"{name}.{overload}" if overload else name


def all_aten():
    """Every aten overload torch registers: full name -> (torchgen schema, tags)."""
    ops = {}
    for s in torch._C._jit_get_all_schemas():
        if not s.name.startswith("aten::"):
            continue
        name = s.name[len("aten::"):]
        try:
            packet = getattr(torch.ops.aten, name)
            overload = getattr(packet, s.overload_name or "default")
        except (AttributeError, RuntimeError):
            continue
        text = str(s)[len("aten::"):]
        try:
            parsed = FunctionSchema.parse(text)
        except (AssertionError, RuntimeError):
            try:
                # torchgen splits arguments at ", ", so a list default printed with spaces
                # (`int[] dims=[0, 1]` of rot90) needs them removed.
                parsed = FunctionSchema.parse(re.sub(r"=\[([^\]]*)\]", lambda m: "=[" + m.group(1).replace(" ", "") + "]", text))
            except (AssertionError, RuntimeError):
                continue  # a type torchgen cannot parse (complex scalars): not one of ours
        ops[full_name(name, s.overload_name)] = (parsed, overload.tags)
    return ops


def functional_args(schema):
    """The non-out arguments as (name, type) pairs: what a functional variant must match."""
    args = schema.arguments
    out = {a.name for a in args.out}
    flat = [a for a in args.flat_all if a.name not in out]
    return [(a.name if a.name != "self" else "self", str(a.type).replace("(a!)", "")) for a in flat]


def functional_of(name, schema, ops):
    """For an in-place or out overload, the functional overload it writes the result of."""
    kind = schema.kind()
    if kind == SchemaKind.functional:
        return None
    base = str(schema.name.name.base)
    want = functional_args(schema)
    candidates = [k for k, (s, _) in ops.items() if str(s.name.name.base) == base
                  and not s.name.name.inplace and s.kind() == SchemaKind.functional]
    for k in sorted(candidates, key=lambda k: (k != base, k)):
        s = ops[k][0]
        if functional_args(s) == want:
            return k
    return None


def arg_json(a, kwarg_only, out_names, written=()):
    ann = a.annotation
    return {
        "name": a.name,
        "type": str(a.type),
        "default": a.default,
        "kwarg_only": kwarg_only,
        "mutable": bool(ann and ann.is_write) or a.name in written,
        "out": a.name in out_names,
    }


def entry(name, schema, tags, ops):
    args = schema.arguments
    out_names = {a.name for a in args.out}
    positional = list(args.flat_positional)
    kw = list(args.flat_kwarg_only) + list(args.out)
    kind = schema.kind()
    written = UNANNOTATED_WRITES.get(name, ())
    tag_names = sorted(t.name for t in tags if t.name in ("core", "pointwise", "view_copy", "nondeterministic_seeded", "dynamic_output_shape", "inplace_view"))
    if kind == SchemaKind.inplace:
        tag_names.append("inplace")
    elif kind == SchemaKind.out:
        tag_names.append("out")
    if any(r.annotation and not r.annotation.is_write for r in schema.returns):
        tag_names.append("view")
    return {
        "name": str(schema.name.name) + ("" if not schema.name.overload_name else ""),
        "overload": schema.name.overload_name,
        "schema": str(schema),
        "args": [arg_json(a, False, out_names, written) for a in positional] + [arg_json(a, True, out_names) for a in kw],
        "returns": [{"name": r.name or "", "type": str(r.type), "alias": str(r.annotation) if r.annotation else None} for r in schema.returns],
        "tags": sorted(set(tag_names)),
        "functional": functional_of(name, schema, ops),
    }


def main():
    ops = all_aten()
    core = {k for k, (_, tags) in ops.items() if torch.Tag.core in tags}
    extra = [l.split("#")[0].strip() for l in (HERE / "extra_ops.txt").read_text().splitlines()]
    extra = [e for e in extra if e]
    missing = [e for e in extra if e not in ops]
    if missing:
        sys.exit(f"extra_ops.txt names overloads torch {torch.__version__} does not have: {missing}")
    wanted = set(core) | set(extra)
    # The in-place and out forms of every wanted functional op.
    for k, (s, _) in ops.items():
        if s.kind() != SchemaKind.functional and functional_of(k, s, ops) in wanted:
            wanted.add(k)
    table = [entry(k, ops[k][0], ops[k][1], ops) for k in sorted(wanted)]
    for e, k in zip(table, sorted(wanted)):
        e["name"], e["overload"] = (k.split(".", 1) + [""])[:2]
    OUT.write_text(json.dumps({"torch_version": torch.__version__.split("+")[0], "ops": table}, indent=1) + "\n")
    n_core = sum("core" in e["tags"] for e in table)
    print(f"wrote {OUT}: {len(table)} overloads ({n_core} core)")


if __name__ == "__main__":
    main()
