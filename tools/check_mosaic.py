#!/usr/bin/env python3
"""Parse and verify Mosaic TPU modules with jaxlib's own MLIR and `tpu` dialect.

Usage: check_mosaic.py [--print] [FILE ...]   (no FILE, or `-`: read stdin)

Accepts both spellings Tessera prints: the serialized form that a `tpu_custom_call` carries
(generic ops renamed `stable_mosaic.<dialect>.<op>`, deserialized here with Mosaic's
`mosaic-serde{serialize=false}` pass, exactly as libtpu does) and the readable form with
plain dialect names. Either way the module is finally parsed again in a context that
rejects unknown ops, so every op and attribute is checked by its real verifier.

Prints `FILE: OK` per module, or `FILE:LINE:COL: error: ...` diagnostics: at the op's own
location where it has one (Tessera prints the kernel's `loc("src.rs":line:col)` after each
op), else at the position in the text as given; exits 1 if any module fails, 2 if jax is not
importable.
"""
import re
import sys

try:
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import tpu
    from jax._src.lib.mlir import ir, passmanager
except ImportError as e:  # pragma: no cover - depends on the venv
    print(f"check_mosaic: jax/jaxlib not importable: {e}", file=sys.stderr)
    sys.exit(2)


def context(allow_unregistered):
    ctx = jax_mlir.make_ir_context()
    tpu.register_dialect(ctx)
    ctx.allow_unregistered_dialects = allow_unregistered
    return ctx


def position(name, location):
    """`file:line:col` of a diagnostic: the op's own `loc("file":line:col)` (Tessera prints
    the kernel's source line after every op), else `name` and the position in the text."""
    m = re.search(r'loc\("((?:[^"\\]|\\.)*)":(\d+):(\d+)\)', str(location))
    if not m:
        return f"{name}:0:0"
    file = name if m.group(1) == "-" else m.group(1)
    return f"{file}:{m.group(2)}:{m.group(3)}"


def diagnostics(name, err):
    """One `file:line:col: error: message` per diagnostic of an MLIRError."""
    diags = getattr(err, "error_diagnostics", None) or []
    lines = []
    for d in diags:
        pos = position(name, d.location)
        lines.append(f"{pos}: error: {d.message}")
        for note in d.notes:
            lines.append(f"{pos}: note: {note.message}")
    return lines or [f"{name}:0:0: error: {str(err).strip()}"]


def check(name, text, show):
    """Returns the list of error lines (empty when the module verifies)."""
    serialized = "stable_mosaic." in text and '"stable_mosaic.' in text
    try:
        if serialized:
            with context(True):
                module = ir.Module.parse(text)
                pm = passmanager.PassManager.parse("builtin.module(mosaic-serde{serialize=false})")
                pm.run(module.operation)
                # Debug info keeps the original line:col in diagnostics of the strict re-parse.
                text = module.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)
        # Strict: every op must now be a registered op whose verifier passes.
        with context(False):
            module = ir.Module.parse(text)
            if not module.operation.verify():
                return [f"{name}:0:0: error: module does not verify"]
            if show:
                print(module.operation.get_asm())
    except ir.MLIRError as e:
        return diagnostics(name, e)
    except Exception as e:  # the bindings raise ValueError for some parse failures
        return [f"{name}:0:0: error: {str(e).strip()}"]
    return []


def main(argv):
    show = "--print" in argv
    files = [a for a in argv if a != "--print"] or ["-"]
    failed = False
    for f in files:
        text = sys.stdin.read() if f == "-" else open(f, encoding="utf-8").read()
        name = "<stdin>" if f == "-" else f
        errors = check(name, text, show)
        if errors:
            failed = True
            print("\n".join(errors))
        else:
            print(f"{name}: OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
